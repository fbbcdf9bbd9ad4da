"""minifused.save / load: round trips, no pickle, atomic writes, damaged files, and a bitwise resume."""
import os
import zipfile

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


def test_file_is_npz_without_pickles(tmp_path):
    mf.save({"w": mf.ones(2)}, tmp_path / "c.ckpt")
    with zipfile.ZipFile(tmp_path / "c.ckpt") as z:
        assert sorted(z.namelist()) == ["__tree__.npy", "a0.npy"]
    data = np.load(tmp_path / "c.ckpt", allow_pickle=False)
    assert data["a0"].tolist() == [1.0, 1.0]


def test_unsupported_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot store an object of type object"):
        mf.save({"x": object()}, tmp_path / "c.ckpt")
    with pytest.raises(TypeError, match="dict keys"):
        mf.save({(1, 2): 3}, tmp_path / "c.ckpt")
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
    mf.save({"w": mf.ones(2)}, tmp_path / "c.ckpt")
    assert mf.load(tmp_path / "c.ckpt", map_location="cpu")["w"].device == "cpu"


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
