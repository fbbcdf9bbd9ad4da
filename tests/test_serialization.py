"""minifused.save / load: round trips, no pickle, atomic writes, damaged files, and a bitwise resume."""
import argparse
import io
import json
import os
import re
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn, optim, serialization
from minifused.data import DataLoader, TensorDataset
from minifused import backend


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    """Tests without an explicit device run the NumPy path, also on a GPU machine."""
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


def test_round_trip_nested(tmp_path):
    obj = {"model": {"w": mf.randn(3, 2), "b": mf.ones(2).to("bfloat16"), "i": mf.arange(5)},
           "epoch": 7, "lr": 1e-3, "name": "mlp", "flags": [True, None, 2.5], "tup": (1, "a"),
           "nan": float("nan"), "inf": float("-inf"), "state": {0: {"step": 3}, 1: {}},
           "arr": np.arange(6, dtype=np.int16).reshape(2, 3), "big": 2 ** 100, "np": np.float32(0.5)}
    path = tmp_path / "c.ckpt"
    assert mf.save(obj, path) == str(path)
    got = mf.load(path)
    for k in ("w", "b", "i"):
        assert got["model"][k].dtype == obj["model"][k].dtype
        np.testing.assert_array_equal(got["model"][k].numpy().astype(np.float64),
                                      obj["model"][k].numpy().astype(np.float64))
    assert got["epoch"] == 7 and got["lr"] == 1e-3 and got["name"] == "mlp"
    assert got["flags"] == [True, None, 2.5] and got["tup"] == (1, "a")
    assert np.isnan(got["nan"]) and got["inf"] == float("-inf")
    assert got["state"] == {0: {"step": 3}, 1: {}} and got["big"] == 2 ** 100 and got["np"] == 0.5
    assert got["arr"].dtype == np.int16 and got["arr"].shape == (2, 3)
    assert list(got) == list(obj)


def test_numpy_scalars_come_back_as_the_python_scalars_they_hold(tmp_path):
    """A flag computed by NumPy (``is_best = acc > best`` on arrays) stays a boolean, as ``np.True_.item()`` is."""
    obj = {"is_best": np.bool_(True), "stop": np.bool_(False), "epoch": np.int64(3), "acc": np.float64(91.5)}
    got = mf.load(mf.save(obj, tmp_path / "c.ckpt"))
    assert got == {"is_best": True, "stop": False, "epoch": 3, "acc": 91.5}
    assert [type(v) for v in got.values()] == [bool, bool, int, float]


def test_zero_dimensional_tensors_keep_their_shape(tmp_path):
    """0-d tensors and arrays (BatchNorm's num_batches_tracked, a step count, a loss) come back 0-d in both formats,
    so a whole model's state dict saved and loaded goes back into the model."""
    model = mf.nn.Sequential(mf.nn.Conv2d(1, 2, 3), mf.nn.BatchNorm2d(2))
    model[1].num_batches_tracked += 3
    obj = {"model": model.state_dict(), "loss": mf.tensor(0.25), "step": np.array(4), "bf": mf.tensor(1.5).bfloat16()}
    got = mf.load(mf.save(obj, tmp_path / "c.ckpt"))
    assert got["model"]["1.num_batches_tracked"].shape == () and got["loss"].shape == () and got["step"].shape == ()
    assert got["bf"].shape == () and float(got["bf"].item()) == 1.5
    fresh = mf.nn.Sequential(mf.nn.Conv2d(1, 2, 3), mf.nn.BatchNorm2d(2))
    fresh.load_state_dict(got["model"])
    assert int(fresh[1].num_batches_tracked.item()) == 3
    st = mf.load(mf.save(model.state_dict(), tmp_path / "m.safetensors"))
    assert st["1.num_batches_tracked"].shape == ()
    fresh.load_state_dict(st)


def test_file_is_npz_without_pickles(tmp_path):
    mf.save({"w": mf.ones(2)}, tmp_path / "c.ckpt")
    with zipfile.ZipFile(tmp_path / "c.ckpt") as z:
        assert sorted(z.namelist()) == ["__tree__.npy", "a0.npy"]
    data = np.load(tmp_path / "c.ckpt", allow_pickle=False)
    assert data["a0"].tolist() == [1.0, 1.0]


def test_pytorchs_pickle_keywords_are_accepted_and_nothing_is_pickled(tmp_path):
    """torch.save's keywords of its pickle file (a protocol, the legacy format, a pickle module) change nothing:
    the file is the same npz, without pickles, and loads back the same values."""
    import pickle

    obj = {"w": mf.tensor(np.arange(6.0).reshape(2, 3)), "step": 3}
    for kw in ({"pickle_protocol": 4}, {"_use_new_zipfile_serialization": False}, {"pickle_module": pickle},
               {"_disable_byteorder_record": True}):
        path = tmp_path / "ck.pt"
        mf.save(obj, path, **kw)
        with np.load(path, allow_pickle=False) as z:  # (raises on an object array)
            assert all(z[k].dtype != object for k in z.files)
        back = mf.load(path)
        assert back["step"] == 3 and np.array_equal(back["w"].numpy(), obj["w"].numpy())


def test_checkpoints_keep_arguments_dtypes_devices_and_ordered_dicts(tmp_path):
    """What training scripts save beside the weights: their argparse arguments (paths too), dtypes, devices; a
    state_dict comes back an OrderedDict, other dicts plain ones, all without pickle."""
    args = argparse.Namespace(lr=0.1, arch="resnet18", sizes=[1, 2], amp=True, out=Path("runs") / "exp1")
    sd = OrderedDict([("b", mf.ones(2)), ("a", mf.zeros(1))])
    mf.save({"args": args, "model": sd, "dtype": mf.bfloat16, "half": mf.float16, "device": mf.device("cpu"),
             "plain": {"x": 1}}, tmp_path / "c.ckpt")
    got = mf.load(tmp_path / "c.ckpt")
    assert isinstance(got["args"], argparse.Namespace) and vars(got["args"]) == vars(args)
    assert isinstance(got["args"].out, Path) and got["args"].out == Path("runs/exp1")  # an argument of type=Path
    assert type(got["model"]) is OrderedDict and list(got["model"]) == ["b", "a"]
    assert got["model"]["b"].tolist() == [1.0, 1.0]
    assert got["dtype"] == mf.bfloat16 and got["half"] == mf.float16 and got["device"] == mf.device("cpu")
    assert type(got["plain"]) is dict and got["plain"] == {"x": 1}


def test_unsupported_objects_are_refused(tmp_path):
    import threading

    with pytest.raises(TypeError, match="cannot pickle"):  # other objects are pickled, as torch.save's
        mf.save({"x": threading.Lock()}, tmp_path / "c.ckpt")
    with pytest.raises(TypeError, match="dict keys"):  # (a tuple key is kept, as torch.save keeps it)
        mf.save({mf.ones(1): 3}, tmp_path / "c.ckpt")
    assert not (tmp_path / "c.ckpt").exists()


def test_interrupted_write_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "c.ckpt"
    mf.save({"epoch": 1}, path)

    def broken(f, **arrays):
        f.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(serialization.np, "savez", broken)
    with pytest.raises(KeyboardInterrupt):
        mf.save({"epoch": 2}, path)
    monkeypatch.undo()
    assert mf.load(path) == {"epoch": 1}
    assert os.listdir(tmp_path) == ["c.ckpt"]


def test_save_into_a_missing_directory_raises_and_creates_nothing(tmp_path):
    """As PyTorch's save: a mistyped folder is an error, not a new directory tree (it was made silently)."""
    path = tmp_path / "no" / "such" / "c.ckpt"
    missing = re.escape(str(tmp_path / "no" / "such"))
    with pytest.raises(RuntimeError, match=f"save: parent directory {missing} does not exist"):
        mf.save({"epoch": 1}, path)
    assert os.listdir(tmp_path) == []


def test_damaged_files(tmp_path):
    path = tmp_path / "c.ckpt"
    mf.save({"w": mf.ones(1000)}, path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        mf.load(path)
    np.savez(path, x=np.ones(2))
    with pytest.raises(ValueError, match="not a readable minifused checkpoint"):
        mf.load(path)
    np.savez(path, x=np.array([{"a": 1}], dtype=object))  # a pickled payload is never unpickled
    with pytest.raises(ValueError):
        mf.load(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        mf.load(tmp_path / "missing.ckpt")


def test_map_location(tmp_path):
    """PyTorch's map_location forms: a device or its name, a dict of saved to target device names, the
    ``lambda storage, loc: storage`` idiom (cpu) or a callable naming a device; a bad one is the caller's
    error, not the file's."""
    path = tmp_path / "c.ckpt"
    mf.save({"w": mf.ones(2)}, path)
    for where in ("cpu", mf.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}, lambda storage, loc: storage,
                  lambda storage, loc: "cpu"):
        w = mf.load(path, map_location=where)["w"]
        assert w.device == "cpu" and w.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="map_location must be None, a device .* got int"):
        mf.load(path, map_location={"cpu": 3})
    with pytest.raises(TypeError, match="load: map_location returned int"):
        mf.load(path, map_location=lambda storage, loc: 3)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        mf.load(path, map_location="tpu")


def _setup(seed=0):
    mf.manual_seed(seed)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50)
    return model, opt, sched


def _steps(model, opt, sched, loader, n):
    losses = []
    it = iter(loader)
    for _ in range(n):
        x, y = next(it)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.numpy().copy())
    return losses


def test_resume_gives_bitwise_equal_losses(tmp_path):
    rng = np.random.default_rng(0)
    data = TensorDataset(mf.tensor(rng.standard_normal((256, 20)).astype(np.float32)),
                         mf.tensor(rng.integers(0, 3, 256)))
    model, opt, sched = _setup()
    loader = DataLoader(data, 32, shuffle=True, seed=5)
    _steps(model, opt, sched, loader, 8)  # one full epoch (8 batches)
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "epoch": 0, "rng": mf.get_rng_state()}
    mf.save(ckpt, tmp_path / "run.ckpt")
    after = _steps(model, opt, sched, loader, 3)

    model2, opt2, sched2 = _setup(seed=123)  # different init and RNG: everything must come from the file
    ck = mf.load(tmp_path / "run.ckpt")
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optimizer"])
    sched2.load_state_dict(ck["scheduler"])
    mf.set_rng_state(ck["rng"])
    loader2 = DataLoader(data, 32, shuffle=True, seed=5)
    loader2.set_epoch(ck["epoch"] + 1)
    resumed = _steps(model2, opt2, sched2, loader2, 3)
    for a, b in zip(after, resumed):
        assert a.tobytes() == b.tobytes(), (a, b)


# ---------------------------------------------------------------- file objects and safetensors

from conftest import host  # noqa: E402

from safetensors.numpy import load_file as st_load_file, save as st_save, save_file as st_save_file  # noqa: E402


def _mlp():
    mf.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))


def test_npz_through_file_objects_and_weights_only():
    obj = {"w": mf.randn(2, 3), "step": 4}
    buf = io.BytesIO()
    assert mf.save(obj, buf) is buf
    buf.seek(0)
    got = mf.load(buf, weights_only=True)
    np.testing.assert_array_equal(got["w"].numpy(), obj["w"].numpy())
    assert got["step"] == 4


def test_safetensors_round_trip_by_suffix(tmp_path):
    sd = {"w": mf.randn(3, 4), "b16": mf.randn(5).to("bfloat16"), "h": mf.ones(2, dtype=mf.float16),
          "d": mf.randn(2, dtype=mf.float64), "i": mf.arange(4), "u": mf.tensor([1, 2], dtype=mf.uint8),
          "flag": mf.tensor([True, False]), "scalar": mf.tensor(2.5)}
    path = tmp_path / "m.safetensors"
    mf.save(sd, path)
    with open(path, "rb") as f:
        assert f.read(16)[8:9] == b"{"  # a safetensors header, not a zip
    got = mf.load(path)
    assert set(got) == set(sd)
    for k, v in sd.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and got[k].device == mf.device("cpu"), k
        np.testing.assert_array_equal(got[k].numpy().astype(np.float64), v.numpy().astype(np.float64))


def test_safetensors_by_argument_and_file_object():
    sd = _mlp().state_dict()
    buf = io.BytesIO()
    mf.save(sd, buf, format="safetensors", metadata={"format": "pt"})
    buf.seek(0)
    got = mf.load(buf)  # told apart by content
    for k, v in sd.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())
    buf.seek(0)
    assert set(mf.load(buf, format="safetensors")) == set(sd)


def test_safetensors_written_by_the_numpy_api_loads_into_a_model(tmp_path):
    model = _mlp()
    rng = np.random.default_rng(3)
    arrays = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in model.state_dict().items()}
    path = tmp_path / "w.safetensors"
    st_save_file(arrays, str(path))
    result = model.load_state_dict(mf.load(path))
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = rng.standard_normal((4, 5)).astype(np.float32)
    h = np.maximum(x @ arrays["0.weight"].T + arrays["0.bias"], 0)
    np.testing.assert_allclose(model(mf.tensor(x)).numpy(), h @ arrays["2.weight"].T + arrays["2.bias"],
                               rtol=1e-5, atol=1e-5)
    # float64 weights are cast into the float32 model, as PyTorch's load_state_dict does
    st_save_file({k: v.astype(np.float64) for k, v in arrays.items()}, str(path))
    model.load_state_dict(mf.load(path))
    assert model.state_dict()["0.weight"].dtype == mf.float32
    # and what minifused writes, the package reads
    mf.save(model.state_dict(), path)
    back = st_load_file(str(path))
    np.testing.assert_array_equal(back["2.bias"], arrays["2.bias"])


def test_safetensors_missing_key_and_bad_input(tmp_path):
    model = _mlp()
    arrays = {k: v.numpy() for k, v in model.state_dict().items() if k != "2.bias"}
    path = tmp_path / "partial.safetensors"
    st_save_file(arrays, str(path))
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "2.bias"'):
        model.load_state_dict(mf.load(path))
    assert model.load_state_dict(mf.load(path), strict=False).missing_keys == ["2.bias"]
    with pytest.raises(TypeError, match="save: the safetensors format stores a flat dict"):
        mf.save([mf.ones(2)], tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="save: the safetensors format stores tensors only, got int for 'step'"):
        mf.save({"w": mf.ones(2), "step": 3}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="save: safetensors keys must be strings"):
        mf.save({0: mf.ones(2)}, tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="save: metadata is stored by the safetensors format only"):
        mf.save({"w": mf.ones(2)}, tmp_path / "x.ckpt", metadata={"a": "b"})
    with pytest.raises(ValueError, match="save: format must be 'safetensors', 'npz' or None"):
        mf.save({"w": mf.ones(2)}, tmp_path / "x.ckpt", format="pickle")
    with pytest.raises(TypeError, match="save: f must be a path or a binary file object"):
        mf.save({"w": mf.ones(2)}, 3)
    with pytest.raises(TypeError, match="load: f must be a path or a binary file object"):
        mf.load(3.5)
    with pytest.raises(TypeError, match="load: the file object must be opened in binary mode"):
        mf.load(io.StringIO("x"))
    good = st_save({"w": np.ones(4, np.float32)})
    with pytest.raises(ValueError, match="load: .* is not a readable safetensors file"):
        mf.load(io.BytesIO(good[:-3]))
    assert not list(tmp_path.glob("x.*"))  # nothing half-written


@pytest.mark.gpu
def test_safetensors_from_pytorch_into_the_same_models(torch, tmp_path):
    """A PyTorch user's MLP and small CNN weights, saved with safetensors.torch, give the same outputs here."""
    from safetensors.torch import save_file as torch_save_file

    tnn = torch.nn
    torch.manual_seed(0)
    t_mlp = tnn.Sequential(tnn.Linear(20, 32), tnn.ReLU(), tnn.Linear(32, 10)).cuda()
    t_cnn = tnn.Sequential(tnn.Conv2d(3, 8, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                           tnn.Conv2d(8, 16, 3, stride=2, padding=1), tnn.ReLU(), tnn.Flatten(),
                           tnn.Linear(16 * 2 * 2, 5)).cuda()
    m_mlp = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))
    m_cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(16 * 2 * 2, 5))
    rng = np.random.default_rng(0)
    cases = [(t_mlp, m_mlp, rng.standard_normal((6, 20))), (t_cnn, m_cnn, rng.standard_normal((2, 3, 8, 8)))]
    for i, (tm, mm, x) in enumerate(cases):
        path = tmp_path / f"model{i}.safetensors"
        torch_save_file(tm.state_dict(), str(path))
        for device in ("cpu", "cuda"):
            mm.to(device)
            result = mm.load_state_dict(mf.load(path, map_location=device))
            assert result.missing_keys == [] and result.unexpected_keys == []
            with torch.no_grad():
                want = tm(torch.tensor(x, dtype=torch.float32, device="cuda")).cpu().numpy()
            got = mm(mf.tensor(x, dtype=mf.float32, device=device)).cpu().numpy()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # bfloat16 weights, as PyTorch writes them (safetensors' BF16), load as bfloat16 tensors
    path = tmp_path / "bf16.safetensors"
    torch_save_file({k: v.to(torch.bfloat16) for k, v in t_mlp.state_dict().items()}, str(path))
    got = mf.load(path, map_location="cuda")
    for k, v in t_mlp.state_dict().items():
        assert got[k].dtype == mf.bfloat16 and got[k].is_cuda
        np.testing.assert_array_equal(host(got[k]).astype(np.float32), v.to(torch.bfloat16).float().cpu().numpy())
    m_mlp.to("cuda").load_state_dict(got)  # cast into the float32 model
    np.testing.assert_array_equal(m_mlp[0].weight.cpu().numpy(),
                                  t_mlp[0].weight.detach().to(torch.bfloat16).float().cpu().numpy())


def test_a_pytorch_pickle_checkpoint_is_refused_with_the_way_out(tmp_path):
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:  # the layout torch.save writes: a zip holding a pickle
        z.writestr("model/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("model/version", b"3\n")
    with pytest.raises(ValueError, match=r"PyTorch pickle checkpoint .*safetensors\.torch\.save_file"):
        mf.load(path, weights_only=True)


# ---------------------------------------------------------------- malformed files: one error class, nothing allocated
def _npz_with(path, members):
    """A zip of raw ``.npy`` members (name -> bytes), as np.savez writes them (stored, not compressed)."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, raw in members.items():
            z.writestr(name + ".npy", raw)


def _npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=True)
    return buf.getvalue()


def _tree_bytes(tree):
    return _npy_bytes(np.frombuffer(json.dumps(tree).encode(), np.uint8))


def _malformed(tmp_path, kind):
    path = tmp_path / f"{kind}.ckpt"
    if kind in ("truncated", "crc"):
        mf.save({"w": mf.ones(1000)}, path)
        raw = bytearray(path.read_bytes())
        if kind == "truncated":
            raw = raw[: len(raw) // 2]
        else:  # one byte of the array's data flipped: the zip's CRC-32 no longer matches
            at = raw.index(np.ones(4, np.float32).tobytes())
            raw[at + 1] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif kind == "magic":
        path.write_bytes(b"NOTAZIP" + bytes(100))
    elif kind == "huge_header":  # claims 10^12 float32 elements in a 16-byte entry
        header = _npy_bytes(np.zeros(4, np.float32)).replace(b"(4,)", b"(1000000000000,)")
        _npz_with(path, {"__tree__": _tree_bytes({"format": serialization.FORMAT, "obj": {"tensor": "a0",
                  "dtype": "float32", "device": "cpu"}}), "a0": header})
    elif kind == "bad_tree":
        _npz_with(path, {"__tree__": _tree_bytes({"format": serialization.FORMAT, "obj": {"dict": [[1]]}})})
    elif kind == "deep":  # (json.dumps itself cannot write this deep)
        text = '{"format": "%s", "obj": %s0%s}' % (serialization.FORMAT, "[" * 5000, "]" * 5000)
        _npz_with(path, {"__tree__": _npy_bytes(np.frombuffer(text.encode(), np.uint8))})
    elif kind == "object_array":
        _npz_with(path, {"__tree__": _tree_bytes({"format": serialization.FORMAT, "obj": {"ndarray": "a0",
                  "dtype": "object"}}), "a0": _npy_bytes(np.array([{"a": 1}], dtype=object))})
    elif kind == "missing_array":
        _npz_with(path, {"__tree__": _tree_bytes({"format": serialization.FORMAT, "obj": {"tensor": "a7",
                  "dtype": "float32", "device": "cpu"}})})
    return path


@pytest.mark.parametrize("kind,words", [
    ("truncated", "truncated or corrupt"), ("crc", "CRC"), ("magic", "not a readable minifused checkpoint"),
    ("huge_header", r"declares shape \(1000000000000,\) \(4000000000000 bytes\) but its entry holds \d+ bytes"),
    ("bad_tree", "is damaged"), ("deep", "nests deeper than 64 levels|RecursionError"),
    ("object_array", "holds Python objects"), ("missing_array", "array 'a7' is missing")])
def test_malformed_checkpoints_raise_one_error_naming_the_file(tmp_path, kind, words):
    path = _malformed(tmp_path, kind)
    with pytest.raises(serialization.CheckpointError, match=words) as info:
        mf.load(path)
    assert str(path) in str(info.value) and isinstance(info.value, ValueError)


def test_a_killed_save_leaves_a_temporary_file_that_the_next_save_reuses(tmp_path):
    path = tmp_path / "c.ckpt"
    leftover = tmp_path / ".c.ckpt.tmp"
    leftover.write_bytes(b"half a checkpoint from a save that was killed")
    mf.save({"epoch": 3}, path)
    assert sorted(os.listdir(tmp_path)) == ["c.ckpt"] and mf.load(path) == {"epoch": 3}


def test_new_checkpoints_get_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        mf.save({"epoch": 1}, tmp_path / "a.ckpt")
        mf.save({"w": mf.ones(2)}, tmp_path / "b.safetensors")
    finally:
        os.umask(old)
    for name in ("a.ckpt", "b.safetensors"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name


def test_lists_and_dicts_saved_twice_load_as_one_object(tmp_path):
    """As pickle's memo keeps them for torch.save: a list or dict (OrderedDict, Counter) met twice in the saved
    object loads as one object (the file holds it once), a list that holds itself loads so, and what was not
    shared stays apart; a reference past the containers met is a damaged file."""
    from collections import Counter

    shared, settings, state = [1, 2.5, "x"], {"lr": 0.1}, OrderedDict(w=mf.ones(2))
    cycle = [0]
    cycle.append(cycle)
    obj = {"a": shared, "b": (shared, [shared]), "c": settings, "d": [settings, {"lr": 0.1}], "e": [state, state],
           "f": cycle, "g": [Counter("aab")] * 2, "h": [1, 2.5, "x"]}
    path = tmp_path / "shared.pt"
    mf.save(obj, path)
    out = mf.load(path)
    assert out["a"] is out["b"][0] is out["b"][1][0] and out["a"] == [1, 2.5, "x"]
    assert out["c"] is out["d"][0] and out["d"][1] is not out["c"] and out["d"][1] == {"lr": 0.1}
    assert out["e"][0] is out["e"][1] and type(out["e"][0]) is OrderedDict
    assert out["e"][0]["w"].tolist() == [1.0, 1.0]
    assert out["f"][1] is out["f"] and out["f"][0] == 0
    assert out["g"][0] is out["g"][1] and out["g"][0] == Counter("aab") and type(out["g"][0]) is Counter
    assert out["h"] == out["a"] and out["h"] is not out["a"]
    with zipfile.ZipFile(path) as z:  # the shared list is stored once: its second and third mentions are refs
        tree = json.loads(np.load(z.open("__tree__.npy")).tobytes().decode())
    assert json.dumps(tree).count('"ref"') == 6
    tree["obj"]["dict"][0][1] = {"ref": 99}
    damaged = tmp_path / "damaged.pt"
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(damaged, "w") as w:
        for name in z.namelist():
            if name != "__tree__.npy":
                w.writestr(name, z.read(name))
        buf = io.BytesIO()
        np.save(buf, np.frombuffer(json.dumps(tree).encode(), np.uint8))
        w.writestr("__tree__.npy", buf.getvalue())
    with pytest.raises(serialization.CheckpointError, match="damaged"):
        mf.load(damaged)


@pytest.mark.gpu
def test_cuda_views_keep_strides_and_share_memory_after_load(tmp_path):
    """CUDA tensors viewing one allocation (a base, its transpose, a channels-last copy's slice, a detached view)
    are stored from one host copy of it: after load they keep their strides and share memory again, as CPU tensors
    do (the file holds one array for them), and their values are the saved ones; a tensor alone stays itself."""
    import cupy

    base = mf.arange(24, dtype=mf.float32, device="cuda").reshape(4, 6)
    cl = mf.randn(2, 3, 4, 5, device="cuda").contiguous(memory_format=mf.channels_last)
    alone = mf.randn(5, device="cuda")
    obj = {"base": base, "t": base.t(), "row": base[1, 2:5], "cl": cl, "cl_slice": cl[:, 1:], "d": base.detach(),
           "alone": alone}
    path = tmp_path / "views.pt"
    mf.save(obj, path)
    with zipfile.ZipFile(path) as z:
        assert len([n for n in z.namelist() if n != "__tree__.npy"]) == 3  # base's, cl's and alone's bytes
    out = mf.load(path)
    for k, t in obj.items():
        assert out[k].is_cuda and tuple(out[k].stride()) == tuple(t.stride()), k
        np.testing.assert_array_equal(out[k].cpu().numpy(), t.cpu().numpy())
    assert out["cl"].is_contiguous(memory_format=mf.channels_last)
    out["base"][1, 3] = -1.0  # one memory again: the views see it
    cupy.cuda.Device().synchronize()
    assert float(out["t"][3, 1]) == -1.0 and float(out["row"][1]) == -1.0 and float(out["d"][1, 3]) == -1.0
    out["cl"][0, 2, 0, 0] = 7.0
    assert float(out["cl_slice"][0, 1, 0, 0]) == 7.0
