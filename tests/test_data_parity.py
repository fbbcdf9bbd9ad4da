"""DataLoader, collate, datasets and samplers as PyTorch's torch.utils.data: lengths and orders read when an
iteration starts, Subsets that follow their base, lazy samplers, PyTorch's worker options, default_collate's
dtypes and containers, random_split, Subset and WeightedRandomSampler details. Expected values are worked out
by hand or with NumPy."""
import collections
import itertools
import math

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from minifused.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, DistributedSampler,
                            IterableDataset, RandomSampler, Sampler, SequentialSampler, StackDataset, Subset,
                            SubsetRandomSampler, TensorDataset, WeightedRandomSampler, default_collate,
                            default_convert, get_worker_info, random_split)


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    """Tests without an explicit device run the NumPy path, also on a GPU machine."""
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


def rows(batches):
    """The batches' first tensors as nested lists."""
    return [b[0].tolist() if isinstance(b, list) else b.tolist() for b in batches]


class Items:
    """A plain map-style dataset over a list that may change."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


# ---------------------------------------------------------------- lengths read when asked for, lazy samplers
def test_loader_follows_a_dataset_that_grows_after_it_was_made():
    buf = Items([1, 2])
    loader = DataLoader(buf, batch_size=1)
    buf.items.append(3)
    assert len(loader) == 3 and loader.n == 3
    assert [b.tolist() for b in loader] == [[1], [2], [3]]
    shuffled = DataLoader(buf, batch_size=2, shuffle=True)
    buf.items += [4, 5]
    assert len(shuffled) == 3 and sorted(v for b in shuffled for v in b.tolist()) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("fast", [True, False])
def test_sampler_that_shrinks_or_grows_after_the_loader_was_made(fast):
    ds = TensorDataset(mf.arange(6.0)) if fast else Items([float(i) for i in range(6)])
    sampler = SubsetRandomSampler([0, 1, 2, 3])
    loader = DataLoader(ds, batch_size=1, sampler=sampler)
    sampler.indices = [4, 1]
    got = rows(loader)
    assert len(loader) == 2 and sorted(got) == [[1.0], [4.0]]  # no empty batches
    sampler.indices = [0, 1, 2, 3, 5]
    assert len(loader) == 5 and sorted(rows(loader)) == [[0.0], [1.0], [2.0], [3.0], [5.0]]


@pytest.mark.parametrize("fast", [True, False])
def test_every_index_a_sampler_yields_is_loaded(fast):
    """PyTorch's BatchSampler batches what the sampler yields, whatever its __len__ says."""
    class Longer(Sampler):
        def __iter__(self):
            return iter([0, 1, 2, 3, 0])

        def __len__(self):
            return 2

    ds = TensorDataset(mf.arange(4.0)) if fast else Items([0.0, 1.0, 2.0, 3.0])
    loader = DataLoader(ds, batch_size=2, sampler=Longer())
    assert len(loader) == 1 and rows(loader) == [[0.0, 1.0], [2.0, 3.0], [0.0]]


@pytest.mark.parametrize("fast", [True, False])
def test_endless_sampler_without_len_is_iterated_lazily(fast):
    class Endless(Sampler):
        def __iter__(self):
            while True:
                yield from range(4)

    ds = TensorDataset(mf.arange(4.0)) if fast else Items([0.0, 1.0, 2.0, 3.0])
    loader = DataLoader(ds, batch_size=3, sampler=Endless())
    assert rows(itertools.islice(loader, 3)) == [[0.0, 1.0, 2.0], [3.0, 0.0, 1.0], [2.0, 3.0, 0.0]]
    with pytest.raises(TypeError, match="has no len"):
        len(loader)
    unbatched = DataLoader(Items([10, 11, 12]), batch_size=None, sampler=itertools.cycle([2, 0]))
    assert list(itertools.islice(unbatched, 3)) == [12, 10, 12]


def test_sampler_of_keys_reaches_the_dataset_as_they_are():
    assert [b.tolist() for b in DataLoader({"a": 1, "b": 2}, batch_size=2, sampler=["b", "a"])] == [[2, 1]]


@pytest.mark.parametrize("subset", [False, True])
def test_sampler_of_index_lists_gives_samples_of_those_rows(subset):
    """A BatchSampler given as ``sampler`` yields lists: PyTorch's loader batches dataset[list] samples, so with
    the default batch_size=1 each batch is (1, len(list), ...) and with batch_size=2 (2, len(list), ...)."""
    x = np.arange(14.0, dtype=np.float32).reshape(7, 2)
    ds = TensorDataset(mf.tensor(x), mf.arange(7))
    ds = Subset(ds, list(range(7))) if subset else ds
    lists = BatchSampler(SequentialSampler(range(7)), 3, False)
    got = [(xb.numpy(), yb.numpy()) for xb, yb in DataLoader(ds, sampler=lists)]
    assert [xb.shape for xb, _ in got] == [(1, 3, 2), (1, 3, 2), (1, 1, 2)]
    np.testing.assert_array_equal(got[1][0], x[None, [3, 4, 5]])
    np.testing.assert_array_equal(got[2][1], [[6]])
    got = [xb.numpy() for xb, _ in DataLoader(ds, sampler=lists, batch_size=2)]
    assert [xb.shape for xb in got] == [(2, 3, 2), (1, 1, 2)]
    np.testing.assert_array_equal(got[0], x[[[0, 1, 2], [3, 4, 5]]])
    unbatched = [xb.numpy() for xb, _ in DataLoader(ds, sampler=lists, batch_size=None)]  # (the fast pattern)
    assert [xb.shape for xb in unbatched] == [(3, 2), (3, 2), (1, 2)]


@pytest.mark.parametrize("fast", [True, False])
def test_loader_iterator_has_the_loaders_length(fast):
    """PyTorch's iter(loader) has a len(): ceil(5 / 2) batches, then StopIteration."""
    ds = TensorDataset(mf.arange(5.0)) if fast else Items([0.0, 1.0, 2.0, 3.0, 4.0])
    it = iter(DataLoader(ds, batch_size=2))
    assert len(it) == 3 and iter(it) is it
    assert [next(it)[0].tolist() if fast else next(it).tolist() for _ in range(len(it))][-1] == [4.0]
    with pytest.raises(StopIteration):
        next(it)
    assert len(iter(DataLoader(ds, batch_size=2, drop_last=True))) == 2

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(TypeError):  # (a stream without __len__: no length, as PyTorch's)
        len(iter(DataLoader(Stream(), batch_size=2)))


def test_batch_sampler_keeps_the_indices_its_sampler_yields():
    """PyTorch's BatchSampler lists what the sampler yields: a dict dataset's keys too, not only ints."""
    assert list(BatchSampler(["b", "a", "c"], 2, False)) == [["b", "a"], ["c"]]
    loader = DataLoader({"a": 1, "b": 2, "c": 3}, batch_sampler=BatchSampler(["c", "a", "b"], 2, False))
    assert [b.tolist() for b in loader] == [[3, 1], [2]]
    ds = TensorDataset(mf.arange(4.0))  # (NumPy ints from a sampler of an array still index the device rows)
    assert rows(DataLoader(ds, batch_sampler=BatchSampler(np.array([3, 0, 2]), 2, False))) == [[3.0, 0.0], [2.0]]


def test_generic_classes_subscript_as_pytorchs():
    """PyTorch's Dataset, Sampler, DataLoader (and the datasets of any item type) are typing generics: typed code
    subclasses Dataset[tuple] and annotates DataLoader[...]; the samplers of ints and TensorDataset are not."""
    class Pairs(Dataset[tuple]):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return mf.full((2,), float(i)), i

    class Odd(Sampler[int]):
        def __iter__(self):
            return iter([1])

    def first(loader: DataLoader[tuple]) -> list:
        return next(iter(loader))

    x, y = first(DataLoader(Pairs(), batch_size=2, sampler=Odd()))
    assert x.tolist() == [[1.0, 1.0]] and y.tolist() == [1]
    for cls in (Dataset, IterableDataset, Subset, ConcatDataset, StackDataset, ChainDataset, Sampler, DataLoader,
                DistributedSampler):
        assert cls[int].__origin__ is cls
    for cls in (TensorDataset, RandomSampler, SequentialSampler, BatchSampler):
        with pytest.raises(TypeError, match="is not a generic class"):
            cls[int]


# ---------------------------------------------------------------- Subsets of device-batched datasets
def test_subset_loader_sees_later_edits_of_its_base():
    x = mf.arange(8.0).reshape(4, 2)
    base = TensorDataset(x)
    sub = Subset(base, [0, 1])
    loader = DataLoader(sub, batch_size=2)
    assert loader._tensors is not None  # still batched from the whole tensors
    x.sub_(100.0)
    want = np.arange(8.0).reshape(4, 2) - 100.0
    np.testing.assert_array_equal(next(iter(loader))[0].numpy(), want[[0, 1]])
    sub.indices = [3, 2, 1]
    assert len(loader) == 2
    assert rows(loader) == [want[[3, 2]].tolist(), want[[1]].tolist()]
    base.tensors = (mf.tensor(np.full((4, 2), 5.0, np.float32)),)
    np.testing.assert_array_equal(next(iter(loader))[0].numpy(), np.full((2, 2), 5.0))


@pytest.mark.parametrize("fast", [True, False])
def test_subset_keeps_the_list_it_was_given(fast):
    """PyTorch's Subset holds the indices list itself: one appended later (active learning's labelled pool) is
    in the subset and its loader."""
    ds = TensorDataset(mf.arange(6.0)) if fast else Items([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    pool = [0, 2]
    sub = Subset(ds, pool)
    loader = DataLoader(sub, batch_size=4)
    assert sub.indices is pool and rows(loader) == [[0.0, 2.0]]
    pool.append(5)
    assert len(sub) == 3 and rows(loader) == [[0.0, 2.0, 5.0]]
    assert Subset(ds, np.array([1, 3])).indices == [1, 3]  # (other sequences: a list of their ints)


def test_subset_random_sampler_keeps_the_list_it_was_given():
    """As PyTorch's: a labelled pool grown after the sampler was made is drawn from whole."""
    pool = [0, 2, 5]
    sampler = SubsetRandomSampler(pool)
    pool.append(4)
    assert sampler.indices is pool and len(sampler) == 4 and sorted(sampler) == [0, 2, 4, 5]
    loader = DataLoader(TensorDataset(mf.arange(6.0)), batch_size=6, sampler=sampler)
    assert sorted(next(iter(loader))[0].tolist()) == [0.0, 2.0, 4.0, 5.0]


def test_random_split_loaders_shuffle_the_current_rows():
    x = mf.arange(10.0)
    mf.manual_seed(0)
    first, second = random_split(TensorDataset(x), [0.5, 0.5])
    loader = DataLoader(first, batch_size=2, shuffle=True)
    x.mul_(3.0)
    got = sorted(v for (b,) in loader for v in b.tolist())
    assert got == sorted(3.0 * i for i in first.indices)


def test_subset_rows_negative_nested_and_out_of_range():
    ds = TensorDataset(mf.arange(5.0))
    assert rows(DataLoader(Subset(ds, [4, -1, 0]), batch_size=2)) == [[4.0, 4.0], [0.0]]
    nested = Subset(Subset(ds, [4, 3, 2]), [2, 0])
    assert rows(DataLoader(nested, batch_size=2)) == [[2.0, 4.0]]
    assert rows(DataLoader(Subset(ds, [4, 3, 2]), batch_sampler=[[2, 0], [1]])) == [[2.0, 4.0], [3.0]]
    with pytest.raises(IndexError, match="DataLoader: index 7 is out of range for 5 samples"):
        list(DataLoader(Subset(ds, [4, 7]), batch_size=2))
    with pytest.raises(IndexError, match="DataLoader: index 7 is out of range for 5 samples"):
        list(DataLoader(ds, batch_size=2, sampler=[4, 7]))


# ---------------------------------------------------------------- the shuffle's seed
@pytest.mark.parametrize("fast", [True, False])
def test_reseeding_the_generator_before_an_epoch_repeats_its_order(fast):
    ds = TensorDataset(mf.arange(20)) if fast else Items(list(range(20)))
    g = mf.Generator()
    loader = DataLoader(ds, batch_size=20, shuffle=True, generator=g)
    assert loader.generator is g
    g.manual_seed(1)
    a = rows([next(iter(loader))])[0]
    g.manual_seed(1)
    b = rows([next(iter(loader))])[0]
    c = rows([next(iter(loader))])[0]
    assert a == b and sorted(a) == list(range(20)) and c != a


def test_global_seed_before_an_epoch_repeats_its_order_an_explicit_seed_fixes_each_epochs():
    from minifused.data import epoch_order

    loader = DataLoader(Items(list(range(20))), batch_size=20, shuffle=True)
    mf.manual_seed(3)
    a = next(iter(loader)).tolist()
    mf.manual_seed(3)
    assert next(iter(loader)).tolist() == a and sorted(a) == list(range(20))
    seeded = DataLoader(Items(list(range(9))), batch_size=9, shuffle=True, seed=5)
    assert next(iter(seeded)).tolist() == epoch_order(9, 5, 0).tolist()
    assert next(iter(seeded)).tolist() == epoch_order(9, 5, 1).tolist()


@pytest.mark.parametrize("shuffle", [False, True])
def test_building_a_loader_leaves_the_global_generator_alone(shuffle):
    mf.manual_seed(0)
    want = mf.rand(3).numpy()
    mf.manual_seed(0)
    loader = DataLoader(TensorDataset(mf.arange(4)), batch_size=2, shuffle=shuffle)
    np.testing.assert_array_equal(mf.rand(3).numpy(), want)
    assert loader.seed is None


# ---------------------------------------------------------------- PyTorch's worker options
def test_distributed_sampler_keeps_its_dataset_as_pytorchs():
    ds = Items(list(range(7)))
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    assert sampler.dataset is ds and len(sampler.dataset) == 7 and list(sampler) == [1, 3, 5, 0]


def test_batching_attributes_are_fixed_once_built_as_pytorchs():
    loader = DataLoader(Items([1, 2, 3]), batch_size=2)
    for name, value in (("batch_size", 3), ("dataset", Items([1])), ("drop_last", True), ("sampler", [0]),
                        ("batch_sampler", [[0]]), ("persistent_workers", True)):
        with pytest.raises(ValueError, match=f"DataLoader: {name} attribute should not be set after DataLoader is "
                                             f"initialized"):
            setattr(loader, name, value)
    loader.collate_fn = len  # (the others may change, as PyTorch's)
    assert loader.batch_size == 2 and list(loader) == [2, 1]


def test_worker_options_are_kept_and_checked_as_pytorchs():
    loader = DataLoader(TensorDataset(mf.ones(4)))
    assert (loader.pin_memory, loader.timeout, loader.worker_init_fn, loader.prefetch_factor,
            loader.persistent_workers, loader.in_order, loader.pin_memory_device, loader.generator,
            loader.multiprocessing_context) == (False, 0, None, None, False, True, "", None, None)
    assert loader.collate_fn is default_collate and DataLoader([1], batch_size=None).collate_fn is default_convert
    calls = []
    spawned = DataLoader(TensorDataset(mf.ones(4)), num_workers=2, multiprocessing_context="spawn", in_order=False,
                         worker_init_fn=calls.append, persistent_workers=True)
    assert spawned.prefetch_factor == 2 and spawned.in_order is False
    assert spawned.multiprocessing_context.get_start_method() == "spawn"
    assert len(list(spawned)) == 4 and calls == [] and get_worker_info() is None  # (no worker processes)
    for kwargs, exc, words in [
            ({"persistent_workers": True}, ValueError, "persistent_workers option needs num_workers > 0"),
            ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified"),
            ({"num_workers": 1, "prefetch_factor": -1}, ValueError, "prefetch_factor option should be non-negative"),
            ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
            ({"multiprocessing_context": "spawn"}, ValueError, "multiprocessing_context can only be used"),
            ({"num_workers": 1, "multiprocessing_context": "nope"}, ValueError, "valid start method"),
            ({"num_workers": 1, "multiprocessing_context": 3}, TypeError, "valid context object")]:
        with pytest.raises(exc, match=words):
            DataLoader([1.0], **kwargs)


def test_collate_fn_given_as_the_default_still_batches_on_the_device():
    loader = DataLoader(TensorDataset(mf.arange(3.0)), batch_size=2, collate_fn=default_collate)
    assert loader._tensors is not None and rows(loader) == [[0.0, 1.0], [2.0]]


# ---------------------------------------------------------------- default_collate as PyTorch's
@pytest.mark.parametrize("batch,dtype", [
    ([mf.ones(2, dtype=mf.int64), mf.ones(2)], np.float32),  # stack's promotion: a float beats an int
    ([mf.ones(2, dtype=mf.uint8), mf.ones(2, dtype=mf.int8)], np.int16),
    ([mf.ones(2, dtype=mf.float16), mf.ones(2, dtype=mf.bfloat16)], np.float32),
    ([np.ones(2, np.int64), np.ones(2, np.float32)], np.float32),
    ([np.ones(2, np.float32), mf.ones(2)], np.float32),
    ([np.float32(1), 2.0], np.float32),  # NumPy scalar first: the elements' dtypes promoted
    ([np.float16(1), 2.0], np.float32),  # (a Python float counts as the default dtype, float32)
    ([np.int32(1), 2], np.int64),
    ([np.int64(1), np.float16(2)], np.float16),
    ([np.float64(1), 2.0], np.float64),
    ([2.0, np.float32(1)], np.float64),  # Python float first: float64
    ([1, 2.5], np.float32),  # Python int first: promoted, floats as the default dtype
    ([1, np.float64(2.5)], np.float64),
    ([1, True], np.int64),
    ([True, False], np.bool_),
    # an array first: the other samples made tensors as PyTorch's as_tensor makes them (Python floats: float32)
    ([np.ones(2, np.float32), [1.0, 2.0]], np.float32),
    ([np.ones((), np.float16), 1.5], np.float32),
    ([np.ones(2, np.int32), [1, 2]], np.int64),
])
def test_default_collate_dtypes_as_pytorchs(batch, dtype):
    out = default_collate(batch)
    assert out.dtype == dtype
    want = np.stack([np.asarray(b.numpy() if isinstance(b, mf.Tensor) else b, np.float64) for b in batch])
    np.testing.assert_array_equal(out.numpy().astype(np.float64), want)


def test_default_collate_refuses_what_pytorchs_refuses():
    with pytest.raises(TypeError, match="expected Tensor as element 1 in argument 0, but got numpy.ndarray"):
        default_collate([mf.ones(2), np.ones(2, np.float32)])
    for arr, name in [(np.array(["a"]), "<U1"), (np.array([b"a"]), "|S1"), (np.array([None]), "object")]:
        with pytest.raises(TypeError, match=f"batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                                            f"found {name}"):
            default_collate([arr, arr])
    with pytest.raises(TypeError, match="a batch of numbers cannot hold str"):
        default_collate([1.0, "a"])
    with pytest.raises(IndexError, match="the batch is empty"):
        default_collate([])


def test_default_collate_containers_as_pytorchs():
    dd = [collections.defaultdict(list, {"x": i, "s": "ab"[i]}) for i in range(2)]
    out = default_collate(dd)
    assert type(out) is collections.defaultdict and out["x"].tolist() == [0, 1] and out["s"] == ["a", "b"]
    assert out.default_factory is list
    out = default_collate([("a", 1, [1, "q"]), ("b", 2, [3, "r"])])
    assert type(out) is list and out[0] == ("a", "b") and out[1].tolist() == [1, 2]
    assert out[2][0].tolist() == [1, 3] and out[2][1] == ("q", "r")
    assert default_collate([["a", 1], ["b", 2]])[0] == ("a", "b")


def test_collate_fn_map_handlers_as_pytorchs(monkeypatch):
    """PyTorch's extension of default_collate: a handler in default_collate_fn_map collates its type at any depth
    (in the loader too); collate() takes a map of its own."""
    from minifused.utils.data._utils.collate import collate, default_collate_fn_map

    class Box:
        def __init__(self, v):
            self.v = v

    def collate_boxes(batch, *, collate_fn_map=None):
        assert collate_fn_map is default_collate_fn_map
        return mf.tensor([b.v for b in batch], dtype=mf.float64)

    monkeypatch.setitem(default_collate_fn_map, Box, collate_boxes)
    out = default_collate([{"b": Box(1.0), "x": 1}, {"b": Box(2.5), "x": 2}])
    assert out["b"].dtype == mf.float64 and out["b"].tolist() == [1.0, 2.5] and out["x"].tolist() == [1, 2]
    batches = list(DataLoader(Items([(Box(0.5), np.float32(2))] * 3), batch_size=2))
    assert [b[0].tolist() for b in batches] == [[0.5, 0.5], [0.5]] and batches[0][1].dtype == mf.float32

    def upper(batch, *, collate_fn_map=None):
        return [s.upper() for s in batch]

    out = collate([("a", 1), ("b", 2)], collate_fn_map={str: upper})  # (other types: the default rules)
    assert out[0] == ["A", "B"] and out[1].tolist() == [1, 2]
    assert default_collate([("a", 1)])[0] == ("a",)  # (the map given to collate was its own)


def test_default_convert_containers_as_pytorchs():
    """PyTorch's default_convert keeps a mapping's or a sequence's own type (a copy of a mutable one), makes plain
    tuples lists, and converts complex arrays too."""
    out = default_convert(collections.defaultdict(list, {"x": np.arange(2, dtype=np.int32), "s": "ab"}))
    assert type(out) is collections.defaultdict and out.default_factory is list and out["s"] == "ab"
    assert out["x"].dtype == mf.int32 and out["x"].tolist() == [0, 1]
    out = default_convert(collections.deque([np.float32(1.5), ("q", np.ones(1))]))
    assert type(out) is collections.deque and out[0].dtype == mf.float32 and out[0].item() == 1.5
    assert type(out[1]) is list and out[1][0] == "q" and out[1][1].tolist() == [1.0]
    assert default_convert(range(3)) == [0, 1, 2]  # (a range cannot be built from a list)
    out = default_convert(np.array([1 + 2j], dtype=np.complex64))
    assert isinstance(out, mf.Tensor) and out.dtype == mf.complex64


def test_collated_samples_keep_requires_grad_as_torch_stack():
    leaves = [mf.tensor([1.0, 2.0], requires_grad=True), mf.tensor([3.0, 4.0])]
    loader = DataLoader(Items(leaves), batch_size=2)
    batch = next(iter(loader))
    assert batch.requires_grad
    (batch * mf.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_array_equal(leaves[0].grad.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("subset", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_tensor_dataset_that_requires_grad_gives_batches_on_its_graph(subset, shuffle):
    """PyTorch's batches of a TensorDataset are stacks of its rows: they require grad where its tensor does
    (a PINN's collocation points), and backward reaches that tensor's rows."""
    x = mf.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    ds = TensorDataset(x, mf.arange(4))
    ds = Subset(ds, [3, 1, 0, 2]) if subset else ds
    xb, yb = next(iter(DataLoader(ds, batch_size=2, shuffle=shuffle)))
    assert xb.requires_grad and not yb.requires_grad and yb.dtype == mf.int64
    (xb * xb).sum().backward()
    rows_in = yb.tolist()  # (the labels are the row numbers)
    want = np.zeros((4, 2))
    want[rows_in] = 2 * np.arange(8.0).reshape(4, 2)[rows_in]
    np.testing.assert_array_equal(x.grad.numpy(), want)


# ---------------------------------------------------------------- datasets and samplers
def test_random_split_lengths_as_pytorch():
    assert [len(s) for s in random_split(range(10), mf.tensor([3, 7]))] == [3, 7]
    assert [len(s) for s in random_split(range(10), mf.tensor([0.5, 0.5]))] == [5, 5]
    assert [len(s) for s in random_split(range(10), np.array([3, 7]))] == [3, 7]
    fracs = [0.3, 0.7 - 1e-12]  # close to 1 (math.isclose) and not above it: fractions
    counts = [math.floor(10 * f) for f in fracs]
    counts[0] += 10 - sum(counts)
    assert [len(s) for s in random_split(range(10), fracs)] == counts == [4, 6]
    for bad in ([0.3, 0.3, 0.39999999], [0.30000001, 0.7]):  # 1e-8 off: not fractions, as PyTorch
        with pytest.raises(ValueError, match="random_split"):
            random_split(range(10), bad)


def test_subset_list_index_and_getitems_as_pytorch():
    sub = Subset(TensorDataset(mf.arange(4.0)), [0, 1, 3])
    item = sub[[0, 2]]
    assert type(item) is tuple and item[0].tolist() == [0.0, 3.0]  # the base's item at the mapped indices
    assert [t[0].tolist() for t in sub.__getitems__([0, 2])] == [0.0, 3.0]

    class Tens(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return i

        def __getitems__(self, idx):
            return [i * 10 for i in idx]

    assert DataLoader(Tens(), batch_size=2).__iter__().__next__().tolist() == [0, 10]
    assert rows(DataLoader(Subset(Tens(), [3, 2, 1]), batch_size=2)) == [[30, 20], [10]]

    class Doubled(Subset):  # (PyTorch 2.13 refuses it without __getitems__; here its __getitem__ is used)
        def __getitem__(self, i):
            return 2 * super().__getitem__(i)

    assert next(iter(DataLoader(Doubled(Tens(), [3, 1]), batch_size=2))).tolist() == [6, 2]


def test_weighted_sampler_without_replacement_past_the_nonzero_weights():
    w = [0.0, 1.0, 1.0, 0.0]
    for seed in range(5):
        mf.manual_seed(seed)
        draw = list(WeightedRandomSampler(w, 3, replacement=False))
        assert sorted(draw[:2]) == [1, 2] and draw[2] in (0, 3)
    assert sorted(WeightedRandomSampler(w, 4, replacement=False)) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="cannot draw 5 distinct indices without replacement from 4 weights"):
        WeightedRandomSampler(w, 5, replacement=False)


def test_empty_datasets_and_batches_as_pytorch():
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        RandomSampler([])
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        DataLoader([], shuffle=True)
    with pytest.raises(ValueError, match="cannot draw 3 samples from an empty data source"):
        list(RandomSampler(Items([]), num_samples=3))
    assert list(DataLoader([])) == []
    with pytest.raises(IndexError, match="a batch of no indices"):
        list(DataLoader(TensorDataset(mf.arange(4.0)), batch_sampler=[[0], []]))
    with pytest.raises(IndexError, match="the batch is empty"):
        list(DataLoader([1.0, 2.0], batch_sampler=[[0], []]))


# ---------------------------------------------------------------- constants from torch 2.13's torch.utils.data
def test_loader_and_sampler_lengths_as_pytorchs():
    ds = TensorDataset(mf.arange(10.0), mf.arange(10))
    assert [len(DataLoader(ds, batch_size=b)) for b in (1, 3, 4, 10, 11)] == [10, 4, 3, 1, 1]
    assert [len(DataLoader(ds, batch_size=3, drop_last=d)) for d in (True, False)] == [3, 4]
    assert [tuple(b[0].shape) for b in DataLoader(ds, batch_size=3, drop_last=True)] == [(3,)] * 3
    assert len(DataLoader(ds, batch_size=None)) == 10 and len(DataLoader(ds, sampler=[0, 5, 9], batch_size=2)) == 2

    class Seven(IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    assert [len(DataLoader(Seven(), batch_size=b)) for b in (1, 3, 7)] == [7, 3, 1]
    assert len(DataLoader(Seven(), batch_size=3, drop_last=True)) == 2 and len(DataLoader(Seven(), None)) == 7
    twice = DataLoader(Seven(), batch_size=4)
    assert [len(list(twice)), len(list(twice))] == [2, 2]
    draws = list(RandomSampler(range(5), num_samples=12))  # without replacement: whole permutations, then a part
    assert len(draws) == 12 and sorted(collections.Counter(draws).values()) == [2, 2, 2, 3, 3]
    assert (list(BatchSampler(range(7), 3, True)), len(BatchSampler(range(7), 3, True))) == ([[0, 1, 2], [3, 4, 5]], 2)
    assert len(BatchSampler(range(7), 3, False)) == 3 and list(BatchSampler(range(7), 3, False))[-1] == [6]
    assert [len(s) for s in random_split(range(10), [0.33, 0.33, 0.34])] == [4, 3, 3]
    assert [len(s) for s in random_split(range(7), [0.5, 0.25, 0.25])] == [4, 2, 1]
    assert [len(s) for s in random_split(range(5), [0.0, 1.0])] == [0, 5]
    assert random_split(range(0), []) == []


def test_dataset_argument_errors_as_pytorchs():
    # PyTorch asserts these (AssertionError); here they are that and a ValueError / TypeError
    for make, kind, words in [
            (lambda: TensorDataset(mf.zeros(3), mf.zeros(4)), ValueError, r"TensorDataset: size mismatch.*\[3, 4\]"),
            (lambda: ConcatDataset([]), ValueError, "ConcatDataset: datasets should not be an empty iterable"),
            (lambda: ConcatDataset([ChainDataset([])]), TypeError, "ConcatDataset does not support IterableDataset"),
            (lambda: list(ChainDataset([Items([1])])), TypeError, "ChainDataset only supports IterableDataset, "
                                                                  "got Items")]:
        for exc in (AssertionError, kind):
            with pytest.raises(exc, match=words):
                make()
    with pytest.raises(IndexError, match="TensorDataset: expected at least one tensor, got none"):
        TensorDataset()
    with pytest.raises(IndexError, match="expected tensors with a first dimension to index, got a 0-d one at pos"):
        TensorDataset(mf.zeros(2), mf.tensor(1.0))
    with pytest.raises(TypeError, match="abstract"):  # no __iter__: PyTorch's IterableDataset is an abstract class
        IterableDataset()
    with pytest.raises(ValueError, match="the lengths sum to 0, the dataset has 3 items"):
        random_split(range(3), [])
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(range(3), shuffle=True, sampler=[0])


def test_default_collate_of_ints_too_large_as_pytorchs():
    # PyTorch: ValueError ("Overflow when unpacking long long") into int64, OverflowError into a float batch
    for batch in ([2 ** 63, 1], [-2 ** 63 - 1], [1, 2 ** 1100]):
        with pytest.raises(ValueError, match="default_collate: a Python int .* too large to convert to int64"):
            default_collate(batch)
    with pytest.raises(OverflowError, match="default_collate: a Python int .* too large to convert to float64"):
        default_collate([1.0, 2 ** 1100])
    assert default_collate([1.0, 2 ** 63]).tolist() == [1.0, 2.0 ** 63]


def test_loader_option_errors_say_what_came():
    # PyTorch's exception types and words, and the values given
    for kwargs, words in [
            ({"batch_size": 2, "batch_sampler": [[0]]}, "mutually exclusive with batch_size, shuffle, sampler, and "
                                                        "drop_last, got batch_size=2"),
            ({"shuffle": True, "drop_last": True, "batch_sampler": [[0]]}, "got shuffle=True, drop_last=True"),
            ({"timeout": -1}, "timeout option should be non-negative, got timeout=-1"),
            ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0, got num_workers=0"),
            ({"num_workers": 1, "prefetch_factor": -1}, "non-negative, got prefetch_factor=-1")]:
        with pytest.raises(ValueError, match=words):
            DataLoader([1.0], **kwargs)
    for weights, words in [([1.0, float("nan")], "got nan at index 1"), ([1.0, 2.0, -2.0], "got -2.0 at index 2")]:
        with pytest.raises(RuntimeError, match=f"WeightedRandomSampler: weights must be finite and non-negative, "
                                               f"{words}"):
            WeightedRandomSampler(weights, 2)


def test_loader_index_and_option_types_as_pytorchs():
    ds = TensorDataset(mf.arange(4.0))
    # PyTorch: IndexError for a float index (its tensor indexing), TypeError for a batch that is a single int
    for kwargs in ({"sampler": [1.0]}, {"batch_sampler": [[1.0]]}, {"sampler": [1.5]}):
        with pytest.raises(IndexError, match="DataLoader: indices must be integers, got float 1"):
            list(DataLoader(ds, **kwargs))
    with pytest.raises(IndexError, match="DataLoader: indices must be integers, got NoneType None"):
        list(DataLoader(ds, sampler=[None]))
    with pytest.raises(TypeError, match="DataLoader: a batch of indices must be iterable, got int"):
        list(DataLoader(ds, batch_sampler=[1, 2]))
    assert [b[0].tolist() for b in DataLoader(ds, batch_sampler=[np.array([3, 1]), mf.tensor([0])])] == [[3.0, 1.0],
                                                                                                          [0.0]]
    # PyTorch's comparisons with 0 raise TypeError for these
    for kwargs, words in [({"timeout": "a"}, "timeout must be a number, got str"),
                          ({"timeout": None}, "timeout must be a number, got NoneType"),
                          ({"num_workers": "2"}, "num_workers must be an int, got str"),
                          ({"num_workers": 1, "prefetch_factor": "a"}, "prefetch_factor must be a number or None")]:
        with pytest.raises(TypeError, match=f"DataLoader: {words}"):
            DataLoader(ds, **kwargs)
    with pytest.raises(TypeError, match="WeightedRandomSampler: weights should be a sequence of numbers, got None"):
        WeightedRandomSampler(None, 2)
