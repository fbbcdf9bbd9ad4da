"""MNIST files (IDX parsing, every damaged-file case), downloads from a local fake mirror
(retries, checksums, no network), and the DataLoader."""
import functools
import gzip
import hashlib
import http.server
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

import minifused as mf
from minifused.data import MNIST, DataLoader, DatasetError, FashionMNIST, TensorDataset, parse_idx
from minifused.data import mnist as M
from minifused import backend


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    """Tests without an explicit device run the NumPy path, also on a GPU machine."""
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)

NAMES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def idx_images(n, seed=0):
    imgs = np.random.default_rng(seed).integers(0, 256, (n, 28, 28), dtype=np.uint8)
    return struct.pack(">IIII", 0x803, n, 28, 28) + imgs.tobytes(), imgs


def idx_labels(n, seed=0):
    labels = np.random.default_rng(seed).integers(0, 10, n, dtype=np.uint8)
    return struct.pack(">II", 0x801, n) + labels.tobytes(), labels


def small_files(n_train=30, n_test=10):
    ti, _ = idx_images(n_train, 1)
    tl, _ = idx_labels(n_train, 2)
    ei, _ = idx_images(n_test, 3)
    el, _ = idx_labels(n_test, 4)
    return dict(zip(NAMES, (ti, tl, ei, el)))


def write(folder, files, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        if gz:
            (folder / (name + ".gz")).write_bytes(gzip.compress(raw))
        else:
            (folder / name).write_bytes(raw)


@pytest.fixture(autouse=True)
def no_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIFUSED_DATA", str(tmp_path / "env-root"))
    monkeypatch.setattr(M, "RETRY_DELAYS", (0.0, 0.0))
    monkeypatch.setattr(M, "TIMEOUT", 5.0)


# ---------------------------------------------------------------- IDX parsing
def test_parse_idx_ok_and_errors():
    raw, imgs = idx_images(3)
    np.testing.assert_array_equal(parse_idx(raw, "f", 3, (28, 28)), imgs)
    with pytest.raises(DatasetError, match=r"f: bad IDX magic number 0x00000801, expected 0x00000803"):
        parse_idx(idx_labels(3)[0], "f", 3)
    with pytest.raises(DatasetError, match="truncated IDX data"):
        parse_idx(raw[:-5], "f", 3)
    with pytest.raises(DatasetError, match="trailing bytes"):
        parse_idx(raw + b"xx", "f", 3)
    with pytest.raises(DatasetError, match="no complete header"):
        parse_idx(b"\x00\x00", "f", 1)
    with pytest.raises(DatasetError, match="truncated IDX header"):
        parse_idx(raw[:8], "f", 3)
    with pytest.raises(DatasetError, match=r"unexpected dimensions \(1, 28, 27\)"):
        parse_idx(struct.pack(">IIII", 0x803, 1, 28, 27) + bytes(28 * 27), "f", 3, (28, 28))


# ---------------------------------------------------------------- local files
@pytest.mark.parametrize("gz", [True, False])
def test_local_files_in_root_mnist(tmp_path, gz):
    files = small_files()
    write(tmp_path / "mnist", files, gz)
    train, test = MNIST(tmp_path, train=True, download=False), MNIST(tmp_path, train=False)
    assert len(train) == 30 and len(test) == 10
    np.testing.assert_array_equal(train.data, idx_images(30, 1)[1])
    assert train.targets.dtype == np.int64
    x, y = train[0]
    assert x.shape == (1, 28, 28) and isinstance(y, int)
    xs, ys = train.as_tensors("cpu")
    assert xs.shape == (30, 1, 28, 28) and xs.dtype == mf.float32 and ys.dtype == mf.int64
    expect = (idx_images(30, 1)[1][0].astype(np.float32) / 255 - 0.1307) / 0.3081
    np.testing.assert_allclose(xs.numpy()[0, 0], expect, rtol=1e-5, atol=1e-6)


def test_root_from_env_and_folder_itself(tmp_path, monkeypatch):
    write(tmp_path / "env-root" / "mnist", small_files())
    assert len(MNIST(download=False)) == 30  # $MINIFUSED_DATA/mnist
    write(tmp_path / "flat", small_files())
    assert len(MNIST(tmp_path / "flat", download=False)) == 30  # the root holds the files itself
    monkeypatch.delenv("MINIFUSED_DATA")
    assert M.default_root() == Path("~/.cache/minifused").expanduser()


def test_shared_mnist_if_present():
    shared = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    if not (shared / "mnist").is_dir():
        pytest.skip("no ../shared/data/mnist beside this checkout")
    test = MNIST(shared, train=False, download=False)  # full size: checked against the published SHA-256
    assert len(test) == 10000 and test.data.shape == (10000, 28, 28)
    assert np.bincount(test.targets).tolist()[:3] == [980, 1135, 1032]


@pytest.mark.parametrize("damage,match", [
    (lambda raw: raw[: len(raw) // 2], "corrupt or truncated gzip"),
    (lambda raw: b"not a gzip file at all", "corrupt or truncated gzip"),
])
def test_damaged_gz_names_the_file(tmp_path, damage, match):
    write(tmp_path / "mnist", small_files())
    f = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
    f.write_bytes(damage(f.read_bytes()))
    with pytest.raises(DatasetError, match=match) as e:
        MNIST(tmp_path, download=False)
    assert str(f) in str(e.value)


def test_damaged_idx_contents(tmp_path):
    files = small_files()
    files["train-labels-idx1-ubyte"] = files["train-labels-idx1-ubyte"][:-3]
    write(tmp_path / "a" / "mnist", files)
    with pytest.raises(DatasetError, match="train-labels-idx1-ubyte.gz: truncated IDX data"):
        MNIST(tmp_path / "a", download=False)
    files = small_files()
    files["train-labels-idx1-ubyte"] = idx_labels(29)[0]
    write(tmp_path / "b" / "mnist", files)
    with pytest.raises(DatasetError, match="30 images but train-labels-idx1-ubyte holds 29 labels"):
        MNIST(tmp_path / "b", download=False)
    files = small_files()
    files["train-labels-idx1-ubyte"] = struct.pack(">II", 0x801, 30) + bytes([12] * 30)
    write(tmp_path / "c" / "mnist", files)
    with pytest.raises(DatasetError, match="label 12 outside 0-9"):
        MNIST(tmp_path / "c", download=False)


def test_full_size_file_is_checked_against_published_checksum(tmp_path, monkeypatch):
    files = small_files()
    size = len(files["t10k-labels-idx1-ubyte"])
    monkeypatch.setitem(MNIST.files, "t10k-labels-idx1-ubyte", (size, "0" * 64, None))
    write(tmp_path / "mnist", files)
    with pytest.raises(DatasetError, match="SHA-256 of the decompressed data does not match"):
        MNIST(tmp_path, train=False, download=False)


def test_missing_files_without_download_say_where(tmp_path):
    with pytest.raises(DatasetError) as e:
        MNIST(tmp_path / "empty", download=False)
    msg = str(e.value)
    assert "download=False" in msg and str(tmp_path / "empty" / "mnist") in msg
    assert "train-images-idx3-ubyte[.gz]" in msg and "MINIFUSED_DATA" in msg


# ---------------------------------------------------------------- downloads (local fake mirror)
@pytest.fixture
def mirror(tmp_path):
    """A local HTTP server on 127.0.0.1 serving tmp_path/www; stopped after the test."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _checked(files):
    """MNIST with the checksums of these small files (as the real class has the published ones)."""
    return {n: (len(raw), hashlib.sha256(raw).hexdigest(), None) for n, raw in files.items()}


def test_download_with_checksum(tmp_path, mirror, monkeypatch):
    www, url = mirror
    files = small_files()
    write(www, files)
    monkeypatch.setattr(MNIST, "files", _checked(files))
    monkeypatch.setattr(MNIST, "mirrors", ("http://127.0.0.1:9/dead/", url))  # first mirror refuses
    ds = MNIST(tmp_path / "cache", train=True, download=True)
    assert len(ds) == 30
    got = sorted(p.name for p in (tmp_path / "cache" / "mnist").iterdir())
    assert got == ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"]  # no temp files left
    assert len(MNIST(tmp_path / "cache", train=True, download=False)) == 30  # cached, no network


def test_download_checksum_mismatch_deletes_file(tmp_path, mirror, monkeypatch):
    www, url = mirror
    files = small_files()
    write(www, files)
    sums = _checked(files)
    sums["train-images-idx3-ubyte"] = (sums["train-images-idx3-ubyte"][0], "f" * 64, None)
    monkeypatch.setattr(MNIST, "files", sums)
    monkeypatch.setattr(MNIST, "mirrors", (url,))
    with pytest.raises(DatasetError, match="failed the checksum check; the downloaded file was deleted"):
        MNIST(tmp_path / "cache", download=True)
    assert not any((tmp_path / "cache" / "mnist").glob("train-images*"))


def test_download_gz_md5_for_fashion(tmp_path, mirror, monkeypatch):
    www, url = mirror
    files = small_files()
    write(www, files)
    sums = {n: (len(raw), None, hashlib.md5((www / (n + ".gz")).read_bytes()).hexdigest())
            for n, raw in files.items()}
    monkeypatch.setattr(FashionMNIST, "files", sums)
    monkeypatch.setattr(FashionMNIST, "mirrors", (url,))
    ds = FashionMNIST(tmp_path / "cache", train=False)
    assert len(ds) == 10 and (tmp_path / "cache" / "fashion-mnist").is_dir()
    assert ds.classes[9] == "Ankle boot"


def test_no_network_and_no_files_says_where_to_put_them(tmp_path, monkeypatch):
    calls = []

    def refuse(url, timeout):
        calls.append(url)
        raise M.urllib.error.URLError("network unreachable")

    monkeypatch.setattr(M, "_urlopen", refuse)
    with pytest.raises(DatasetError) as e:
        MNIST(tmp_path / "cache")
    msg = str(e.value)
    assert "download failed" in msg and str(tmp_path / "cache" / "mnist") in msg and "network unreachable" in msg
    assert len(calls) == 3 * len(MNIST.mirrors)  # retries on every mirror
    assert not list((tmp_path / "cache" / "mnist").iterdir())


def test_truncated_download_is_rejected(tmp_path, mirror, monkeypatch):
    www, url = mirror
    files = small_files()
    write(www, files)
    f = www / "train-images-idx3-ubyte.gz"
    f.write_bytes(f.read_bytes()[:100])
    monkeypatch.setattr(MNIST, "files", _checked(files))
    monkeypatch.setattr(MNIST, "mirrors", (url,))
    with pytest.raises(DatasetError, match="corrupt or truncated gzip"):
        MNIST(tmp_path / "cache")
    assert not any((tmp_path / "cache" / "mnist").glob("train-images*"))


# ---------------------------------------------------------------- DataLoader
def _data(n=103):
    x = mf.arange(n * 2, dtype=mf.float32).reshape(n, 2)
    return TensorDataset(x, mf.arange(n))


def test_loader_batches_cover_everything():
    dl = DataLoader(_data(), 10, shuffle=True, seed=3)
    assert len(dl) == 11
    seen = np.concatenate([y.numpy() for _, y in dl])
    assert sorted(seen.tolist()) == list(range(103))
    x, y = next(iter(DataLoader(_data(), 10)))
    np.testing.assert_array_equal(y.numpy(), np.arange(10))
    np.testing.assert_array_equal(x.numpy()[:, 0], 2 * np.arange(10))
    dl = DataLoader(_data(), 10, drop_last=True)
    assert len(dl) == 10 and all(len(y) == 10 for _, y in dl)


def test_loader_sampler_and_batch_sampler_as_pytorchs():
    """loader.sampler / loader.batch_sampler exist as PyTorch's do (len(loader.sampler) is the dataset's size):
    without a sampler given, the loader's own order of its next epoch, and batches of it."""
    dl = DataLoader(_data(), 10, shuffle=True, seed=3, drop_last=True)
    assert len(dl.sampler) == 103 and len(dl.batch_sampler) == len(dl) == 10
    batches = list(dl.batch_sampler)
    assert [i for b in batches for i in b] == list(dl.sampler)[:100] and sorted(dl.sampler) == list(range(103))
    assert [y.tolist() for _, y in dl] == batches  # (y is the index: _data's targets are 0 .. 102)
    S = mf.utils.data
    plain = DataLoader(_data(), 4)
    assert list(plain.sampler) == list(range(103)) and list(plain.batch_sampler)[-1] == [100, 101, 102]
    assert DataLoader(_data(), None).batch_sampler is None
    given = mf.utils.data.SequentialSampler(range(5))
    assert DataLoader(_data(), 2, sampler=given).sampler is given
    with_batches = DataLoader(_data(), batch_sampler=[[5, 1]])  # (PyTorch makes an unused sequential sampler)
    assert isinstance(with_batches.sampler, S.SequentialSampler) and len(with_batches.sampler) == 103
    # the loader's own order is the sampler class PyTorch's loader makes (code checks it with isinstance)
    assert isinstance(dl.sampler, S.RandomSampler) and not isinstance(dl.sampler, S.SequentialSampler)
    assert isinstance(plain.sampler, S.SequentialSampler) and not isinstance(plain.sampler, S.RandomSampler)
    assert dl.sampler.replacement is False and dl.sampler.num_samples == 103 and dl.sampler.data_source is dl.dataset


def test_loader_order_depends_on_seed_and_epoch_only():
    a = [y.numpy() for _, y in DataLoader(_data(), 16, shuffle=True, seed=1)]
    b = DataLoader(_data(), 16, shuffle=True, seed=1)
    first = [y.numpy() for _, y in b]
    second = [y.numpy() for _, y in b]  # the next epoch: another order
    assert all((p == q).all() for p, q in zip(a, first))
    assert any((p != q).any() for p, q in zip(first, second))
    c = DataLoader(_data(), 16, shuffle=True, seed=1)
    c.set_epoch(1)
    assert all((p == q).all() for p, q in zip(second, [y.numpy() for _, y in c]))


def test_loader_host_collate_path():
    class Plain:
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return mf.ones(3) * i, i

    xs, ys = zip(*DataLoader(Plain(), 3))
    assert [len(y) for y in ys] == [3, 3, 1] and ys[0].dtype == mf.int64
    np.testing.assert_array_equal(xs[2].numpy(), [[6, 6, 6]])
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(Plain(), 0)


def test_loader_collates_python_numbers_as_pytorch():
    """PyTorch's default_collate: Python floats become float64, ints int64."""
    class Numbers:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return i / 4, i

    fl, ints = next(iter(DataLoader(Numbers(), 3)))
    assert fl.dtype == mf.float64 and ints.dtype == mf.int64
    np.testing.assert_array_equal(fl.numpy(), [0.0, 0.25, 0.5])


@pytest.mark.gpu
def test_loader_on_gpu_keeps_data_there(tmp_path):
    write(tmp_path / "mnist", small_files())
    ds = MNIST(tmp_path, download=False)
    dl = DataLoader(ds, 8, shuffle=True, seed=0, device="cuda")
    assert dl._tensors[0].is_cuda
    batches = list(dl)
    assert all(x.is_cuda and y.is_cuda for x, y in batches)
    cpu = DataLoader(ds, 8, shuffle=True, seed=0, device="cpu")
    for (xg, yg), (xc, yc) in zip(batches, cpu):
        np.testing.assert_array_equal(yg.cpu().numpy(), yc.numpy())
        np.testing.assert_allclose(xg.cpu().numpy(), xc.numpy(), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- torch.utils.data spellings
from minifused.utils.data import (BatchSampler, ConcatDataset, Dataset, RandomSampler, Sampler,  # noqa: E402
                                  SequentialSampler, Subset, SubsetRandomSampler, WeightedRandomSampler,
                                  default_collate, random_split)


class Squares(Dataset):
    """A user dataset as PyTorch code writes one."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.array([i, i * i], np.float32), i


def test_dataset_subclass_through_the_loader():
    assert isinstance(TensorDataset(mf.zeros(2)), Dataset)
    batches = list(DataLoader(Squares(5), batch_size=2, shuffle=False, num_workers=0, pin_memory=True))
    assert len(batches) == 3
    x, y = batches[1]
    assert x.dtype == mf.float32 and y.dtype == mf.int64  # NumPy arrays keep their dtype
    np.testing.assert_array_equal(x.numpy(), [[2, 4], [3, 9]])
    np.testing.assert_array_equal(y.numpy(), [2, 3])
    with pytest.raises(NotImplementedError, match="Dataset must define __getitem__"):
        Dataset()[0]


def test_default_collate_nested_structures():
    items = [{"x": mf.ones(2) * i, "pair": (i, float(i)), "name": f"s{i}"} for i in range(3)]
    out = default_collate(items)
    np.testing.assert_array_equal(out["x"].numpy(), [[0, 0], [1, 1], [2, 2]])
    assert out["pair"][0].dtype == mf.int64 and out["pair"][1].dtype == mf.float64
    assert out["name"] == ["s0", "s1", "s2"]
    single = default_collate([mf.tensor([1.0, 2.0]), mf.tensor([3.0, 4.0])])
    np.testing.assert_array_equal(single.numpy(), [[1, 2], [3, 4]])


def test_default_collate_named_tuples_numpy_scalars_and_bad_items_as_pytorch():
    """A named tuple keeps its type, NumPy scalars their dtype (int32 stays int32), as PyTorch's; samples of
    unequal shapes, or of a type it cannot batch (None), are clear errors (not a raw NumPy one, nor an object
    array)."""
    import collections

    pair = collections.namedtuple("Pair", "x y")
    out = default_collate([pair(np.ones(2, np.float32), 1), pair(np.zeros(2, np.float32), 2)])
    assert type(out) is pair and out.x.dtype == mf.float32 and out.y.tolist() == [1, 2]
    assert default_collate([np.int32(1), np.int32(2)]).dtype == mf.int32
    assert default_collate([np.float16(1.5), np.float16(2)]).tolist() == [1.5, 2.0]
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, got shapes "
                                           r"\[\(2,\), \(3,\)\]"):
        default_collate([mf.ones(2), mf.ones(3)])
    with pytest.raises(TypeError, match="batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                                        "NoneType"):
        default_collate([None, None])


def test_batches_of_tuple_samples_are_lists_as_pytorch():
    """PyTorch collates tuple samples (a TensorDataset's among them) into a list per batch; so do the loader's
    device-resident batches, in order, shuffled or by a batch sampler."""
    assert type(default_collate([(1, 2.0), (3, 4.0)])) is list
    x, y = mf.arange(6.0).reshape(3, 2), mf.tensor([0, 1, 2])
    for kwargs in ({}, {"shuffle": True}, {"batch_sampler": BatchSampler(SequentialSampler(range(3)), 2, False)}):
        batches = list(DataLoader(TensorDataset(x, y), **({"batch_size": 2} if "batch_sampler" not in kwargs
                                                          else {}), **kwargs))
        assert all(type(b) is list and len(b) == 2 for b in batches), kwargs
        got = sorted(int(v) for b in batches for v in b[1].tolist())
        assert got == [0, 1, 2]
        for xb, yb in batches:
            np.testing.assert_array_equal(xb.numpy(), x.numpy()[yb.numpy()])


def test_collate_fn_and_unused_worker_arguments():
    seen = []

    def collate(items):
        seen.append(len(items))
        return [it[1] for it in items]

    dl = DataLoader(Squares(5), 2, collate_fn=collate, num_workers=2, persistent_workers=False, timeout=0,
                    worker_init_fn=None, prefetch_factor=None)
    assert list(dl) == [[0, 1], [2, 3], [4]] and seen == [2, 2, 1]
    # a TensorDataset with a collate_fn goes item by item too
    out = list(DataLoader(_data(4), 4, collate_fn=lambda items: len(items)))
    assert out == [4]


def test_samplers():
    ds = Squares(6)
    assert list(SequentialSampler(ds)) == list(range(6)) and len(SequentialSampler(ds)) == 6
    mf.manual_seed(0)
    a = list(RandomSampler(ds))
    mf.manual_seed(0)
    assert list(RandomSampler(ds)) == a and sorted(a) == list(range(6))
    draws = list(RandomSampler(ds, replacement=True, num_samples=20))
    assert len(draws) == 20 and all(0 <= d < 6 for d in draws)
    more = list(RandomSampler(ds, num_samples=9))
    assert len(more) == 9 and sorted(more[:6]) == list(range(6))
    sub = SubsetRandomSampler([1, 3, 5])
    assert sorted(sub) == [1, 3, 5] and len(sub) == 3
    gen = np.random.default_rng(4)
    assert sorted(RandomSampler(ds, generator=gen)) == list(range(6))
    assert list(BatchSampler(SequentialSampler(range(7)), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(SequentialSampler(range(7)), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2

    class Evens(Sampler):
        def __iter__(self):
            return iter([0, 2, 4])

        def __len__(self):
            return 3

    ys = [y.numpy().tolist() for _, y in DataLoader(ds, 2, sampler=Evens())]
    assert ys == [[0, 2], [4]]


def test_weighted_random_sampler():
    """Draws in proportion to the weights (20000 draws: within 4 standard deviations), never a zero weight;
    distinct indices without replacement; manual_seed repeats a draw; bad weights and counts refused."""
    mf.manual_seed(0)
    draws = np.array(list(WeightedRandomSampler([1.0, 0.0, 3.0, 4.0], 20000)))
    freq = np.bincount(draws, minlength=4) / len(draws)
    want = np.array([1, 0, 3, 4]) / 8
    assert (np.abs(freq - want) <= 4 * np.sqrt(want * (1 - want) / len(draws)) + 1e-12).all() and freq[1] == 0
    once = list(WeightedRandomSampler(mf.tensor([0.5, 2.0, 0.0, 1.0, 1.0]), 4, replacement=False))
    assert sorted(once) == [0, 1, 3, 4] and len(WeightedRandomSampler([1, 2], 7)) == 7
    mf.manual_seed(5)
    a = list(WeightedRandomSampler([1, 2, 3], 10))
    mf.manual_seed(5)
    assert list(WeightedRandomSampler([1, 2, 3], 10)) == a
    ys = [y.numpy().tolist() for _, y in DataLoader(Squares(4), 3, sampler=WeightedRandomSampler([0, 0, 1, 0], 6))]
    assert ys == [[2, 2, 2], [2, 2, 2]]
    for args, words in [(([[1.0, 2.0]], 2), "1d sequence"), (([1.0, 2.0], 0), "num_samples should be a positive")]:
        with pytest.raises(ValueError, match=words):
            WeightedRandomSampler(*args)
    # weights no draw can come from: RuntimeError, as PyTorch's (its torch.multinomial's)
    for args, words in [(([1.0, -1.0], 2), "finite and non-negative"), (([0.0, 0.0], 2), "sum to zero"),
                        (([1.0, np.nan], 2), "finite"), (([1.0, np.inf], 2), "finite"),
                        (([1.0, 2.0], 3, False), "cannot draw 3 distinct indices")]:
        with pytest.raises(RuntimeError, match=words):
            WeightedRandomSampler(*args)
    with pytest.raises(ValueError, match="replacement should be a boolean"):
        WeightedRandomSampler([1.0], 1, replacement=1)
    # PyTorch's sampler.weights is a float64 tensor; one put in its place (or edited) sets the next epoch's draws
    sampler = WeightedRandomSampler([1, 0, 3], 6)
    assert isinstance(sampler.weights, mf.Tensor) and sampler.weights.dtype == mf.float64
    assert sampler.weights.tolist() == [1.0, 0.0, 3.0]
    sampler.weights = mf.tensor([0.0, 1.0, 0.0])
    assert list(sampler) == [1] * 6
    sampler.weights[1] = 0.0
    sampler.weights[2] = 2.0
    assert list(sampler) == [2] * 6


@pytest.mark.parametrize("fast", [True, False])
def test_loader_sampler_and_batch_sampler(fast):
    ds = _data(10) if fast else Squares(10)
    idx = [7, 1, 4]
    ys = np.concatenate([b[1].numpy() for b in DataLoader(ds, 2, sampler=SubsetRandomSampler(idx))])
    assert sorted(ys.tolist()) == sorted(idx)
    batches = [[3, 0], [9], [5, 6, 2]]
    dl = DataLoader(ds, batch_sampler=batches)
    assert len(dl) == 3
    assert [b[1].numpy().tolist() for b in dl] == batches
    dl = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 4, drop_last=True))
    assert [b[1].numpy().tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_subset_concat_and_random_split():
    ds = _data(10)
    sub = Subset(ds, [2, 5])
    assert len(sub) == 2 and int(sub[1][1]) == 5
    dl = DataLoader(sub, 2)
    assert dl._tensors is not None  # a Subset of a TensorDataset still batches whole tensors
    np.testing.assert_array_equal(next(iter(dl))[1].numpy(), [2, 5])
    assert not hasattr(Subset(Squares(3), [0]), "as_tensors")
    both = ConcatDataset([Squares(2), Squares(3)])
    assert len(both) == 5 and both[3][1] == 1 and both[-1][1] == 2
    assert len(Squares(2) + Squares(1)) == 3
    with pytest.raises(IndexError, match="ConcatDataset: index 5 out of range"):
        both[5]
    assert both[-5][1] == 0 and [y for _, y in both] == [0, 1, 0, 1, 2]  # (the IndexError past the end ends it)
    with pytest.raises(ValueError, match="absolute value of index should not exceed dataset length, got index -6"):
        both[-6]  # (PyTorch's ValueError)
    mf.manual_seed(1)
    parts = random_split(ds, [7, 3])
    assert [len(p) for p in parts] == [7, 3]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    mf.manual_seed(1)
    assert random_split(ds, [7, 3])[1].indices == parts[1].indices  # seeded by manual_seed
    frac = random_split(Squares(11), [0.5, 0.3, 0.2])
    assert [len(p) for p in frac] == [6, 3, 2]  # floors 5, 3, 2; the remainder goes to the first
    assert [len(p) for p in random_split(ds, [1, 0])] == [10, 0]  # lengths summing to 1 are fractions (PyTorch)
    gen = random_split(ds, [5, 5], generator=np.random.default_rng(0))
    assert sorted(gen[0].indices + gen[1].indices) == list(range(10))


@pytest.mark.parametrize("call,exc,match", [
    (lambda ds: random_split(ds, [3, 3]), ValueError, "random_split: the lengths sum to 6, the dataset has 10"),
    (lambda ds: random_split(ds, 5), TypeError, "random_split: lengths must be a list"),
    (lambda ds: random_split(ds, [2.5, 7.5]), ValueError, "random_split: fractions must lie in"),
    (lambda ds: random_split(ds, [-1, 11]), ValueError, "random_split: lengths must be non-negative ints"),
    (lambda ds: random_split(ds, [5, 5], generator=3), TypeError, "random_split: generator must be"),
    (lambda ds: Subset(ds, [1.5]), TypeError, "Subset: indices must be ints"),
    (lambda ds: Subset(ds, 3), TypeError, "Subset: indices must be a sequence of ints"),
    (lambda ds: ConcatDataset([]), ValueError, "ConcatDataset: datasets should not be an empty"),
    (lambda ds: RandomSampler(ds, num_samples=0), ValueError, "RandomSampler: num_samples should be a positive"),
    (lambda ds: RandomSampler(ds, replacement=1), TypeError, "RandomSampler: replacement should be a bool"),
    (lambda ds: BatchSampler(range(3), 0, False), ValueError, "BatchSampler: batch_size should be a positive"),
    (lambda ds: BatchSampler(range(3), 2, None), ValueError, "BatchSampler: drop_last should be a bool"),
    (lambda ds: DataLoader(ds, 4, batch_sampler=[[0]]), ValueError, "batch_sampler option is mutually exclusive"),
    (lambda ds: DataLoader(ds, shuffle=True, batch_sampler=[[0]]), ValueError, "mutually exclusive"),
    (lambda ds: DataLoader(ds, 2, num_workers=-1), ValueError, "DataLoader: num_workers must be a non-negative"),
    (lambda ds: DataLoader(ds, 2, collate_fn=3), TypeError, "DataLoader: collate_fn must be callable"),
    (lambda ds: DataLoader(ds, 2, generator=5), TypeError, "DataLoader: generator must be"),
    # PyTorch's loader hands drop_last to its BatchSampler, which takes only a bool
    (lambda ds: DataLoader(ds, 2, drop_last=None), ValueError, "DataLoader: drop_last should be a boolean value, "
                                                                 "but got drop_last=None"),
    (lambda ds: DataLoader(ds, 2, drop_last=1), ValueError, "drop_last should be a boolean value"),
])
def test_bad_data_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_data(10))


def test_unbatched_loading():
    dl = DataLoader(Squares(3), batch_size=None)
    items = list(dl)
    assert len(dl) == 3 and len(items) == 3
    x, y = items[2]
    assert isinstance(x, mf.Tensor) and x.shape == (2,) and y == 2  # arrays become tensors, numbers stay
    rows = list(DataLoader(_data(3), batch_size=None))
    assert rows[1][0].shape == (2,) and int(rows[1][1]) == 1
    with pytest.raises(ValueError, match="batch_size=None option disables auto-batching"):
        DataLoader(Squares(3), batch_size=None, drop_last=True)


def test_tensor_dataset_batches_stay_on_its_device_unless_asked():
    """As PyTorch's DataLoader: a TensorDataset's batches stay where its tensors are (not on the default
    device, which is cuda on a GPU machine)."""
    x, y = mf.randn(6, 2, device="cpu"), mf.arange(6, device="cpu")
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    assert loader.device == backend.CPU
    assert all(b.device == backend.CPU for batch in loader for b in batch)
    assert DataLoader(Subset(TensorDataset(x, y), [0, 2]), batch_size=2).device == backend.CPU


def test_loader_batches_are_copies_and_read_the_dataset_as_pytorch():
    """Batches of a TensorDataset are fresh tensors (a batch edited in place leaves the dataset alone); a subclass
    that transforms or shortens its samples is read through its own __getitem__ / __len__ (a Subset of it too);
    tensors given to the dataset after the loader was made are the ones batched."""
    x = mf.tensor(np.arange(8, dtype=np.float32).reshape(4, 2))
    for (b,) in DataLoader(TensorDataset(x), batch_size=2):
        b.add_(100)
    np.testing.assert_array_equal(x.numpy(), np.arange(8).reshape(4, 2))

    class Scaled(TensorDataset):
        def __getitem__(self, i):
            return tuple(t[i] * 10 for t in self.tensors)

    class Short(TensorDataset):
        def __len__(self):
            return 3

    got = np.concatenate([b.numpy() for (b,) in DataLoader(Scaled(x), batch_size=3)])
    np.testing.assert_array_equal(got, 10 * np.arange(8).reshape(4, 2))
    sub = mf.data.Subset(Scaled(x), [3, 1])
    np.testing.assert_array_equal(next(iter(DataLoader(sub, batch_size=2)))[0].numpy(), [[60, 70], [20, 30]])
    assert [b.shape[0] for (b,) in DataLoader(Short(x), batch_size=2)] == [2, 1]
    ds = TensorDataset(x)
    loader = DataLoader(ds, batch_size=4)
    ds.tensors = (mf.tensor(np.ones((2, 2), np.float32)),)
    np.testing.assert_array_equal(next(iter(loader))[0].numpy(), np.ones((2, 2)))
