"""A catalogue of bad input across the API (CPU): each case raises the named exception with
a message that names the problem, and leaves model weights and optimizer state unchanged. The ops'
cases live with their entries in tests/opinfo.py (``errors=``); here: tensors, autograd, modules,
optimizers, data files and checkpoints."""
import gzip
import io
import json
import pickle
import struct
import threading

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn, optim
from conftest import doubling_function
from opinfo import bad_inputs
from opinfo import cpu_randn as t


def backward_twice():
    x = t(3, requires_grad=True)
    y = x.exp().sum()
    y.backward()
    y.backward()


def bad_truncated_mnist(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for name in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]:
        (folder / f"{name}.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x03\x00\x00"))
    from minifused.data import MNIST

    MNIST(root=str(tmp_path), train=True, download=False)


def corrupt_checkpoint(tmp_path):
    path = tmp_path / "ckpt.npz"
    path.write_bytes(b"not a zip file at all")
    mf.load(str(path))


CASES = [
    # tensors: creation, conversion
    ("item_many", lambda: t(3).item(), ValueError, "one-element"),
    ("bool_ambiguous", lambda: bool(t(3)), RuntimeError, "ambiguous"),
    ("dtype_name", lambda: mf.zeros(2, dtype="float12"), TypeError, "unknown dtype"),
    ("randint_range", lambda: mf.randint(5, 5, (2,)), ValueError, "low < high"),
    ("randint_no_size", lambda: mf.randint(2, 5), TypeError, r"randint: size must be a tuple of ints, got NoneType"),
    ("randint_int_size", lambda: mf.randint(0, 5, 3), TypeError, r"randint: size must be a tuple of ints, got int \(3\)"),
    ("arange_step", lambda: mf.arange(0, 3, 0), ValueError, "step must be nonzero"),
    ("arange_step_sign", lambda: mf.arange(0, 5, -1), ValueError, r"arange: the bounds and the step's sign disagree"),
    ("arange_step_sign_float", lambda: mf.arange(5.0, 0.0, 0.5), ValueError, "a negative step needs end < start"),
    ("to_unknown_device", lambda: t(2).to("tpu"), ValueError, r"to\(\): unknown device 'tpu'"),
    ("negative_shape", lambda: mf.zeros(-1), ValueError, "non-negative"),
    # autograd
    ("int_requires_grad", lambda: mf.tensor([1, 2], requires_grad=True), TypeError, "floating-point"),
    ("nonscalar_backward", lambda: (t(3, requires_grad=True) * 2).backward(), RuntimeError, "scalar"),
    ("backward_no_grad", lambda: t(3).sum().backward(), RuntimeError, "does not require grad"),
    ("backward_twice", backward_twice, RuntimeError, "second time"),
    ("leaf_inplace", lambda: t(3, requires_grad=True).add_(1), RuntimeError, "in-place"),
    ("gradient_shape", lambda: (t(3, requires_grad=True) * 2).backward(mf.ones(4)), RuntimeError,
     r"Mismatch in shape: grad_output\[0\] has a shape of \(4,\)"),
    # layers
    ("linear_activation", lambda: nn.Linear(3, 4, activation="tanh"), ValueError, "activation"),
    ("conv_module_kernel", lambda: nn.Conv2d(1, 2, 0), ValueError, "kernel_size"),
    ("dropout_p", lambda: nn.Dropout(1.5), ValueError, "between 0 and 1"),
    # optimizers
    ("optim_no_params", lambda: optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
    ("optim_lr", lambda: optim.Adam(nn.Linear(2, 2).parameters(), lr=-1), ValueError, "learning rate"),
    ("optim_betas", lambda: optim.Adam(nn.Linear(2, 2).parameters(), betas=(1.0, 0.9)), ValueError, "beta"),
    ("optim_nesterov", lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, nesterov=True), ValueError,
     "Nesterov"),
    ("optim_nonleaf", lambda: optim.SGD([t(2, requires_grad=True) * 2], lr=0.1), ValueError, "non-leaf"),
    # data and checkpoints
    ("loader_batch", lambda: __import__("minifused.data", fromlist=["DataLoader"]).DataLoader(
        __import__("minifused.data", fromlist=["TensorDataset"]).TensorDataset(t(4, 2)), batch_size=0),
     ValueError, "batch_size"),
    ("loader_batch_bool", lambda: __import__("minifused.data", fromlist=["DataLoader"]).DataLoader(
        __import__("minifused.data", fromlist=["TensorDataset"]).TensorDataset(t(4, 2)), batch_size=True),
     ValueError, "batch_size must be a positive integer, got True"),
    ("loader_seed_negative", lambda: __import__("minifused.data", fromlist=["DataLoader"]).DataLoader(
        __import__("minifused.data", fromlist=["TensorDataset"]).TensorDataset(t(4, 2)), 2, seed=-1),
     ValueError, "seed must be a non-negative integer or None, got -1"),
    ("load_missing", lambda: mf.load("/nonexistent/ckpt.npz"), FileNotFoundError, "no such file"),
    ("save_unsupported", lambda: mf.save({"f": threading.Lock()}, "/tmp/never.npz"), TypeError, "cannot pickle"),
    # tensors: data, devices, gradients
    ("tensor_strings", lambda: mf.tensor(["a", "b"]), TypeError, "not numeric"),
    ("tensor_string_array", lambda: mf.tensor(np.array(["a"])), TypeError, "not numeric"),
    ("unknown_device", lambda: mf.zeros(2, device="tpu"), ValueError, "unknown device 'tpu'"),
    ("grad_not_tensor", lambda: setattr(nn.Parameter(t(2)), "grad", [1.0, 2.0]), TypeError,
     "Tensor or None, got list"),
    ("grad_shape", lambda: setattr(nn.Parameter(t(2)), "grad", t(3)), RuntimeError, r"grad has shape \(3,\)"),
    ("grad_dtype", lambda: setattr(nn.Parameter(t(2)), "grad", t(2, dtype=mf.float64)), RuntimeError,
     "grad has dtype float64"),
    ("requires_grad_int_inplace", lambda: mf.tensor([1, 2]).requires_grad_(), TypeError, "floating-point"),
    ("requires_grad_off_nonleaf", lambda: setattr(t(2, requires_grad=True) * 2, "requires_grad", False),
     RuntimeError, "leaf"),
    ("normal_negative_std", lambda: t(2).normal_(0.0, -1.0), ValueError, "std must be >= 0"),
    # NaN where an error is expected
    ("sgd_lr_nan", lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr=float("nan")), ValueError,
     "invalid learning rate nan"),
    ("adam_eps_nan", lambda: optim.Adam(nn.Linear(2, 2).parameters(), eps=float("nan")), ValueError,
     "invalid epsilon nan"),
    ("clip_nonfinite", lambda: _clip_nan(), RuntimeError, "non-finite"),
    # unsupported layer arguments
    ("linear_float_features", lambda: nn.Linear(2.5, 3), TypeError, "must be ints, got 2.5"),
    ("linear_negative_features", lambda: nn.Linear(-1, 3), ValueError, ">= 0"),
    ("linear_int_input", lambda: nn.Linear(2, 3)(mf.tensor([[1, 2]])), TypeError, "unsupported dtype int64"),
    ("conv_kernel_3d", lambda: nn.Conv2d(1, 2, (3, 3, 3)), ValueError, "kernel_size must be an int or a pair"),
    ("conv_kernel_float", lambda: nn.Conv2d(1, 2, 2.5), TypeError, "kernel_size"),
    ("conv_module_stride", lambda: nn.Conv2d(1, 2, 3, stride=0), ValueError, "stride must be >= 1"),
    ("conv_module_padding", lambda: nn.Conv2d(1, 2, 3, padding="full"), ValueError, "Invalid padding string 'full'"),
    ("conv_groups", lambda: nn.Conv2d(3, 2, 3, groups=2), ValueError, "in_channels must be divisible by groups"),
    ("layernorm_module_input", lambda: nn.LayerNorm(4)(t(2, 3)), ValueError,
     r"normalized_shape=\[4\], expected input with shape \[\*, 4\]"),
    ("layernorm_negative", lambda: nn.LayerNorm(-1), ValueError, "non-negative"),
    ("maxpool_kernel0", lambda: nn.MaxPool2d(0)(t(1, 1, 4, 4)), ValueError, "kernel_size must be >= 1"),
    ("maxpool_too_big", lambda: nn.MaxPool2d(5)(t(1, 1, 4, 4)), ValueError, "larger than the padded input"),
    ("maxpool_padding", lambda: nn.MaxPool2d(2, padding=2)(t(1, 1, 4, 4)), ValueError, "at most half"),
    ("maxpool_2d_input", lambda: nn.MaxPool2d(2)(t(4, 4)), ValueError, "4-D input"),
    ("maxpool_dilation", lambda: nn.MaxPool2d(2, dilation=-1)(t(1, 1, 4, 4)), ValueError,
     "max_pool2d: dilation must be >= 1"),
    ("avgpool_int", lambda: nn.AvgPool2d(2)(mf.zeros(1, 1, 4, 4, dtype=mf.int32)), TypeError,
     "floating-point or int64"),
    ("dropout_negative", lambda: nn.Dropout(-0.1), ValueError, "between 0 and 1"),
    ("dropout_string", lambda: nn.Dropout("0.5"), TypeError, "dropout probability must be a number, got str"),
    ("sequential_non_module", lambda: nn.Sequential(nn.Linear(2, 2), 5), TypeError, "'1' is a int, not a Module"),
    ("module_to_int", lambda: nn.Linear(2, 2).to(mf.int64), TypeError, "only accepts floating point or complex dtypes"),
    # optimizers
    ("optim_lr_string", lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr="0.1"), TypeError,
     "invalid learning rate '0.1'"),
    ("optim_betas_single", lambda: optim.Adam(nn.Linear(2, 2).parameters(), betas=(0.9,)), ValueError,
     "betas must be a pair"),
    ("optim_weight_decay", lambda: optim.AdamW(nn.Linear(2, 2).parameters(), weight_decay=-0.1), ValueError,
     "weight_decay"),
    ("optim_momentum", lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, momentum=-1), ValueError,
     "momentum"),
    ("optim_group_no_params", lambda: optim.SGD([{"lr": 0.1}], lr=0.1), KeyError, "'params' entry"),
    ("optim_group_not_a_dict", lambda: optim.SGD([nn.Linear(2, 2).weight], lr=0.1).add_param_group([]), TypeError,
     "must be a dict with a 'params' entry, got list"),
    ("optim_duplicate", lambda: optim.SGD([nn.Linear(2, 2).weight] * 2, lr=0.1), ValueError,
     "same parameter more than once"),
    ("optim_int_param", lambda: optim.SGD([mf.tensor([1, 2])], lr=0.1), TypeError, "floating-point"),
    ("optim_tensor_not_list", lambda: optim.SGD(nn.Linear(2, 2).weight, lr=0.1), TypeError, "iterable"),
    ("optim_no_params_generator", lambda: optim.Adam(iter([])), ValueError, "empty parameter list"),
    # found by a differential sweep against PyTorch: each raised NumPy's or Python's own error, named another op,
    # or returned a result where PyTorch raises
    ("squeeze_repeated_dim", lambda: t(2, 1).squeeze((1, 1)), RuntimeError, r"squeeze: dim \(1, 1\) names a "
     "dimension more than once"),
    ("squeeze_repeated_negative_dim", lambda: t(2, 1).squeeze_((1, -1)), RuntimeError, "more than once"),
    ("tile_negative", lambda: t(3).tile(-1), RuntimeError, r"tile: dims must be non-negative, got \(-1,\)"),
    ("type_as_not_tensor", lambda: t(3).type_as(3), TypeError, r"type_as\(\): argument 'other' .* not int"),
    ("expand_as_not_tensor", lambda: t(1).expand_as((3,)), TypeError, r"expand_as\(\): .* must be Tensor, not tuple"),
    ("view_as_not_tensor", lambda: t(3).view_as(None), TypeError, r"view_as\(\): .* not NoneType"),
    ("lerp_broadcast", lambda: mf.lerp(t(3), t(4), 0.5), RuntimeError, r"lerp: shapes \(3,\) and \(4,\)"),
    ("lerp_weight_broadcast", lambda: mf.lerp(t(3), t(3), t(2)), RuntimeError, r"lerp: shapes \(3,\) and \(2,\)"),
    ("zeros_names_itself", lambda: mf.zeros(2, -1), RuntimeError, r"zeros: expected a shape of non-negative ints"),
    ("full_names_itself", lambda: mf.full((2.5,), 1.0), TypeError, r"full: expected a shape of non-negative ints"),
    ("arange_nan_bound", lambda: mf.arange(0, float("nan")), RuntimeError, r"arange: unsupported range: 0 -> nan"),
    ("arange_inf_bound", lambda: mf.arange(float("-inf"), 3.0), RuntimeError, r"unsupported range: -inf -> 3.0"),
    ("arange_nan_step", lambda: mf.arange(0, 1, float("nan")), RuntimeError, "step must be nonzero, got nan"),
    ("index_add_out_of_range", lambda: t(5, 2).index_add_(0, mf.tensor([0, 7]), t(2, 2)), RuntimeError,
     "index_add_: index 7 is out of bounds for dimension 0 with size 5"),
    ("index_select_out_of_range", lambda: t(3, 2).index_select(0, mf.tensor([3])), IndexError,
     "index_select: index 3 is out of bounds"),
    ("index_reduce_out_of_range", lambda: t(5).index_reduce_(0, mf.tensor([0, 7]), t(2), "prod"), IndexError,
     "index_reduce: index 7 is out of bounds for dimension 0 with size 5"),
    ("index_reduce_negative", lambda: t(5).index_reduce(0, mf.tensor([-1]), t(1), "amax"), IndexError,
     "index_reduce: index -1 is out of bounds"),
    ("bincount_float", lambda: mf.bincount(mf.tensor([0.0, 1.0])), NotImplementedError,
     "bincount: .* got float32"),
    ("bitwise_and_float", lambda: t(2) & t(2), NotImplementedError, "bitwise_and: only integer and bool tensors"),
    ("softmax_int", lambda: F.softmax(mf.ones(2, 3, dtype=mf.int64), 1), NotImplementedError,
     "softmax: expected a float32"),
    ("softplus_int", lambda: F.softplus(mf.ones(3, dtype=mf.int64)), NotImplementedError,
     "softplus: expected a floating-point input"),
    ("batch_norm_int", lambda: nn.BatchNorm2d(3)(mf.ones(2, 3, 2, 2, dtype=mf.int64)), NotImplementedError,
     "batch_norm: expected a floating-point input"),
    ("embedding_bag_out_of_range", lambda: F.embedding_bag(mf.tensor([[1, 7]]), t(5, 3)), IndexError,
     r"embedding_bag: index 7 at position 1 is out of range \[0, 5\)"),
    ("sequential_index", lambda: nn.Sequential(nn.ReLU())[3], IndexError,
     "Sequential: index 3 is out of range for 1 modules"),
    ("modulelist_index", lambda: nn.ModuleList([nn.ReLU()])[-2], IndexError,
     "ModuleList: index -2 is out of range for 1 modules"),
    ("modulelist_index_str", lambda: nn.ModuleList([nn.ReLU()])["0"], TypeError,
     "ModuleList indices must be integers or slices, got str"),
    ("modulelist_extend_module", lambda: nn.ModuleList().extend(nn.ReLU()), TypeError,
     "ModuleList.extend should be called with an iterable, but got ReLU"),
    ("uniform_int", lambda: mf.zeros(2, dtype=mf.int64).uniform_(), NotImplementedError,
     "uniform_: expected a floating-point tensor, got int64"),
    ("normal_int", lambda: mf.zeros(2, dtype=mf.int64).normal_(), NotImplementedError, "normal_: expected a floating"),
    ("exponential_int", lambda: mf.zeros(2, dtype=mf.int64).exponential_(), RuntimeError,
     "exponential_: expected a floating-point tensor"),
    ("kaiming_uniform_int", lambda: nn.init.kaiming_uniform_(mf.zeros(2, 2, dtype=mf.int64)), NotImplementedError,
     "uniform_: expected a floating-point tensor"),
    ("trunc_normal_int", lambda: nn.init.trunc_normal_(mf.zeros(2, dtype=mf.int64)), NotImplementedError,
     "trunc_normal_: expected a floating-point tensor"),
    ("autocast_device", lambda: mf.autocast("tpu"), RuntimeError, "autocast: device_type must be 'cuda' or 'cpu'"),
    ("clip_norm_type_string", lambda: nn.utils.clip_grad_norm_(nn.Linear(2, 2).parameters(), 1.0, norm_type="fro"),
     ValueError, "norm_type must be a number \\(or 'inf'\\), got 'fro'"),
    ("clip_norm_type_none", lambda: nn.utils.clip_grad_norm_(nn.Linear(2, 2).parameters(), 1.0, norm_type=None),
     TypeError, "norm_type must be a number"),
    ("mha_key_batch", lambda: nn.MultiheadAttention(8, 2)(t(3, 2, 8), t(4, 3, 8), t(4, 3, 8)), RuntimeError,
     r"key of shape \(4, 3, 8\) does not fit the query's batch"),
    ("sort_descending_string", lambda: t(3).sort(descending="yes"), TypeError,
     r"sort\(\): argument 'descending' must be bool, not str"),
    ("argsort_stable_none", lambda: t(3).argsort(stable=None), TypeError, "argument 'stable' must be bool"),
    ("topk_largest_int", lambda: t(3).topk(2, largest=0), TypeError, "topk\\(\\): argument 'largest' must be bool"),
    ("histc_int", lambda: mf.histc(mf.ones(3, dtype=mf.int64)), NotImplementedError,
     "histc: expected a floating-point input, got dtype int64"),
    ("mean_keepdim_int", lambda: t(2, 3).mean(0, keepdim=1), TypeError,
     r"mean\(\): argument 'keepdim' must be bool, not int"),
    ("max_keepdim_string", lambda: t(2, 3).max(0, keepdim="yes"), TypeError, "max\\(\\): argument 'keepdim'"),
    ("argmax_keepdim_string", lambda: t(2, 3).argmax(0, keepdim="yes"), TypeError, "argmax\\(\\): argument 'keepdim'"),
    ("median_keepdim_string", lambda: t(2, 3).median(0, keepdim="yes"), TypeError, "median\\(\\): argument"),
    ("logsumexp_keepdim_string", lambda: t(2, 3).logsumexp(0, keepdim="yes"), TypeError, "logsumexp\\(\\): argument"),
    ("std_unbiased_string", lambda: t(3).std(unbiased="yes"), TypeError, "std\\(\\): argument 'unbiased' must be bool"),
    ("unique_sorted_string", lambda: mf.unique(t(3), sorted="yes"), TypeError, "unique\\(\\): argument 'sorted'"),
    ("isclose_equal_nan_string", lambda: mf.isclose(t(3), t(3), equal_nan="yes"), TypeError,
     "isclose\\(\\): argument 'equal_nan' must be bool"),
    ("nonzero_as_tuple_string", lambda: mf.nonzero(t(3), as_tuple="yes"), TypeError,
     "nonzero\\(\\): argument 'as_tuple'"),
    ("searchsorted_right_string", lambda: mf.searchsorted(mf.tensor([1.0, 2.0]), t(3), right="yes"), TypeError,
     "searchsorted\\(\\): argument 'right' must be bool"),
    # data
    ("dataset_lengths", lambda: __import__("minifused.data", fromlist=["TensorDataset"]).TensorDataset(
        t(4, 2), t(3)), ValueError, "different lengths"),
]


def _clip_nan():
    p = nn.Parameter(t(2))
    p.grad = mf.tensor([float("nan"), 1.0])
    nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case):
    _, fn, exc, pattern = case
    with pytest.raises(exc, match=pattern):
        fn()


@pytest.mark.parametrize("case", bad_inputs(), ids=lambda b: b.name)
def test_op_bad_input(case):
    with pytest.raises(case.exc, match=case.match):
        case.fn()


@pytest.mark.parametrize("fn", [bad_truncated_mnist, corrupt_checkpoint])
def test_bad_files_name_the_file(fn, tmp_path):
    from minifused.data.mnist import DatasetError

    with pytest.raises((ValueError, DatasetError), match=r"(ubyte\.gz|ckpt\.npz).*(truncated|corrupt|not)"):
        fn(tmp_path)


def _snapshot(model, opt):
    weights = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    state = {id(p): {k: (v.numpy().copy() if isinstance(v, mf.Tensor) else v) for k, v in st.items()}
             for p, st in opt.state.items()}
    return weights, state


def _same(a, b):
    wa, sa = a
    wb, sb = b
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert sa.keys() == sb.keys()
    for k in sa:
        for name in sa[k]:
            assert np.array_equal(np.asarray(sa[k][name]), np.asarray(sb[k][name]))


def _trained():
    mf.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    opt = optim.Adam(model.parameters(), lr=0.1)
    F.cross_entropy(model(t(5, 4)), mf.tensor([0, 1, 0, 1, 1])).backward()
    opt.step()
    F.cross_entropy(model(t(5, 4)), mf.tensor([0, 1, 0, 1, 1])).backward()  # fresh grads for the next step
    return model, opt


def test_failed_calls_leave_model_and_optimizer_unchanged():
    model, opt = _trained()
    before = _snapshot(model, opt)
    with pytest.raises(ValueError):
        model(t(5, 7))  # wrong in_features
    with pytest.raises(ValueError):
        F.cross_entropy(model(t(2, 4)), mf.tensor([0, 5]))  # label out of range
    with pytest.raises(RuntimeError, match="size|shape"):
        bad = model.state_dict()
        bad["0.weight"] = mf.zeros(9, 9)
        model.load_state_dict(bad)
    with pytest.raises(RuntimeError, match="Unexpected key|Missing key"):
        model.load_state_dict({"nope": mf.zeros(1)})
    with pytest.raises(ValueError):
        other = optim.Adam(nn.Linear(9, 9).parameters())
        other.step()
        opt.load_state_dict(other.state_dict())
    _same(before, _snapshot(model, opt))


# ---- damaged data files: each names the file and what is wrong with it

def _idx(n=5, rows=28, labels=None):
    rng = np.random.default_rng(0)
    img = struct.pack(">IIII", 0x803, n, rows, rows) + rng.integers(0, 256, n * rows * rows, dtype=np.uint8).tobytes()
    lbl = struct.pack(">II", 0x801, n) + bytes(labels if labels is not None else [i % 10 for i in range(n)])
    return img, lbl


_IMG, _LBL = _idx()
DATA_FILES = [  # (id, images .gz bytes, labels .gz bytes, regex)
    ("gzip_cut", gzip.compress(_IMG)[:-20], gzip.compress(_LBL), r"images-idx3-ubyte\.gz: corrupt or truncated gzip"),
    ("not_gzip", b"garbage bytes", gzip.compress(_LBL), r"images-idx3-ubyte\.gz: corrupt or truncated gzip"),
    ("idx_short", gzip.compress(_IMG[:-10]), gzip.compress(_LBL), r"images-idx3-ubyte\.gz: truncated IDX data"),
    ("idx_header_only", gzip.compress(_IMG[:6]), gzip.compress(_LBL), r"images-idx3-ubyte\.gz: truncated IDX header"),
    ("trailing_bytes", gzip.compress(_IMG + b"xx"), gzip.compress(_LBL), "2 unexpected trailing bytes"),
    ("swapped", gzip.compress(_LBL), gzip.compress(_IMG), r"images-idx3-ubyte\.gz: bad IDX magic number 0x00000801"),
    ("image_size", gzip.compress(_idx(rows=32)[0]), gzip.compress(_LBL), r"unexpected dimensions \(5, 32, 32\)"),
    ("counts", gzip.compress(_IMG), gzip.compress(_idx(n=4)[1]), "holds 5 images but .* holds 4 labels"),
    ("label_range", gzip.compress(_IMG), gzip.compress(_idx(labels=[0, 1, 2, 3, 12])[1]),
     r"labels-idx1-ubyte\.gz: label 12 outside 0-9"),
]


@pytest.mark.parametrize("images,labels,pattern", [c[1:] for c in DATA_FILES], ids=[c[0] for c in DATA_FILES])
def test_damaged_mnist_files(images, labels, pattern, tmp_path):
    from minifused.data import MNIST
    from minifused.data.mnist import DatasetError

    folder = tmp_path / "mnist"
    folder.mkdir()
    (folder / "train-images-idx3-ubyte.gz").write_bytes(images)
    (folder / "train-labels-idx1-ubyte.gz").write_bytes(labels)
    with pytest.raises(DatasetError, match=pattern):
        MNIST(root=tmp_path, train=True, download=False)


def test_missing_mnist_files_without_download(tmp_path):
    from minifused.data import MNIST
    from minifused.data.mnist import DatasetError

    with pytest.raises(DatasetError, match=r"files not found \(download=False\).*train-images-idx3-ubyte"):
        MNIST(root=tmp_path, train=True, download=False)


# ---- damaged or foreign checkpoints

def _rewrite(path, out, change):
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    change(arrays)
    with open(out, "wb") as f:  # a file object: np.savez would add ".npz" to the name
        np.savez(f, **arrays)


def _retree(arrays, **fields):
    tree = json.loads(arrays["__tree__"].tobytes())
    tree.update(fields)
    arrays["__tree__"] = np.frombuffer(json.dumps(tree).encode(), np.uint8)


CHECKPOINTS = [  # (id, writer(good_path, bad_path), regex)
    ("truncated", lambda g, b: b.write_bytes(g.read_bytes()[: g.stat().st_size // 2]), "truncated or corrupt"),
    ("empty", lambda g, b: b.write_bytes(b""), "truncated or corrupt"),
    ("foreign_npz", lambda g, b: _rewrite(g, b, lambda a: (a.clear(), a.update(x=np.zeros(3)))),
     "no __tree__ entry"),
    ("bare_npy", lambda g, b: b.write_bytes(_npy_bytes(np.zeros(3))), "not an archive"),
    ("pickle", lambda g, b: b.write_bytes(pickle.dumps({"weight": [1.0]})), "truncated or corrupt"),
    ("missing_array", lambda g, b: _rewrite(g, b, lambda a: a.pop("a1")), "damaged: array 'a1' is missing"),
    ("dtype_changed", lambda g, b: _rewrite(g, b, lambda a: a.update(a0=a["a0"].astype(np.float64))),
     "damaged: array 'a0' has dtype float64"),
    ("other_format", lambda g, b: _rewrite(g, b, lambda a: _retree(a, format="other-9")), "format 'other-9'"),
    ("bad_tree_json", lambda g, b: _rewrite(g, b, lambda a: a.update(__tree__=np.frombuffer(b"{nope", np.uint8))),
     "truncated or corrupt"),
]


def _npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


@pytest.mark.parametrize("writer,pattern", [c[1:] for c in CHECKPOINTS], ids=[c[0] for c in CHECKPOINTS])
def test_damaged_checkpoints(writer, pattern, tmp_path):
    model = nn.Linear(3, 2)
    good, bad = tmp_path / "good.ckpt", tmp_path / "bad.ckpt"
    mf.save(model.state_dict(), good)
    writer(good, bad)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=pattern) as info:
        model.load_state_dict(mf.load(bad))
    assert "bad.ckpt" in str(info.value)  # the message names the file
    assert all(np.array_equal(before[k], v.numpy()) for k, v in model.state_dict().items())


def test_failed_save_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "run.ckpt"
    model = nn.Linear(3, 2)
    mf.save({"model": model.state_dict(), "epoch": 1}, path)
    with pytest.raises(TypeError, match="cannot pickle"):  # (other objects are pickled, as torch.save's)
        mf.save({"model": model.state_dict(), "epoch": 2, "oops": threading.Lock()}, path)
    assert mf.load(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"]  # no temporary file left behind


# ---- model and optimizer state unchanged after failed calls

def _groups(opt):
    return [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad", "NAdam", "Adadelta", "Adafactor"])
def test_a_bad_hyper_parameter_in_a_later_group_cannot_half_update_a_step(name):
    """A learning rate set to a string in the second group fails the step before the first group moves (it
    updated the first group's parameters and state, then raised on the second's)."""
    mf.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    opt = getattr(optim, name)([{"params": model[0].parameters()}, {"params": model[1].parameters()}], lr=0.1)
    for _ in range(2):
        model(t(5, 4)).sum().backward()
        opt.step()
    opt.param_groups[1]["lr"] = "x"
    before = _snapshot(model, opt)
    with pytest.raises(TypeError, match="group entry 'lr' must be a number or a one-element tensor, got 'x'"):
        opt.step()
    _same(before, _snapshot(model, opt))


@pytest.mark.parametrize("modules", [lambda: nn.ModuleList([nn.ReLU()]), lambda: nn.Sequential(nn.ReLU())])
def test_extend_with_a_non_module_adds_none(modules):
    """Every entry is checked before any is appended (the modules before the bad one were added)."""
    modules = modules()
    with pytest.raises(TypeError, match=f"{type(modules).__name__}.extend: int is not a Module"):
        modules.extend([nn.Tanh(), 3])
    assert [type(m) for m in modules] == [nn.ReLU]


def test_wrong_gradient_cannot_half_update_a_step():
    """A gradient that does not fit its parameter is refused when assigned, so a later step
    cannot update some parameters and then fail on the misfit (it used to: three of four
    parameters and their Adam state moved, then NumPy raised a broadcasting error)."""
    model, opt = _trained()
    before = _snapshot(model, opt)
    last = list(model.parameters())[-1]
    for bad, exc, pattern in [(t(5), RuntimeError, r"shape \(5,\), the tensor \(2,\)"),
                              (t(2, dtype=mf.float64), RuntimeError, "dtype float64, the tensor float32"),
                              (np.zeros(2, np.float32), TypeError, "Tensor or None")]:
        with pytest.raises(exc, match=pattern):
            last.grad = bad
    assert last.grad is not None and last.grad.shape == (2,)
    _same(before, _snapshot(model, opt))
    opt.step()  # the valid gradients still step normally


@pytest.mark.parametrize("other", ["sgd", "adam_other_model", "adam_two_groups"])
def test_optimizer_rejects_a_foreign_state_dict(other):
    model, opt = _trained()
    before, groups = _snapshot(model, opt), _groups(opt)
    if other == "sgd":  # an SGD state dict given to Adam used to load, then the next step raised KeyError 'step'
        foreign = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        pattern = r"hyper-parameters \['dampening', 'momentum', 'nesterov'\] that Adam does not use"
    elif other == "adam_other_model":
        foreign = optim.Adam(nn.Linear(4, 3).parameters())
        pattern = "group 0 has 2 parameters in the state dict, 4 in the optimizer"
    else:
        m = nn.Linear(4, 3)
        foreign = optim.Adam([{"params": [m.weight]}, {"params": [m.bias]}])
        pattern = "2 parameter groups, the optimizer 1"
    with pytest.raises(ValueError, match=pattern):
        opt.load_state_dict(foreign.state_dict())
    _same(before, _snapshot(model, opt))
    assert _groups(opt) == groups
    opt.step()


def test_optimizer_state_with_wrong_shapes_is_refused_before_anything_changes():
    model, opt = _trained()
    before, groups = _snapshot(model, opt), _groups(opt)
    sd = opt.state_dict()
    bad = {"state": {i: dict(s) for i, s in sd["state"].items()},
           "param_groups": [dict(g, lr=123.0) for g in sd["param_groups"]]}
    bad["state"][3]["exp_avg"] = mf.zeros(7)  # the last parameter's: earlier ones would load first
    with pytest.raises(ValueError, match=r"state 'exp_avg' of parameter 3 has shape \(7,\)"):
        opt.load_state_dict(bad)
    _same(before, _snapshot(model, opt))
    assert _groups(opt) == groups  # lr not half-applied


@pytest.mark.parametrize("case", ["foreign_model", "last_key_shape", "list_values", "not_a_mapping"])
def test_model_rejects_a_bad_state_dict_before_copying(case):
    model, opt = _trained()
    before = _snapshot(model, opt)
    sd = model.state_dict()
    if case == "foreign_model":
        sd = nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 2)).state_dict()
        pattern = r"size mismatch for 0\.weight: copying a param with shape \(5, 4\)"
    elif case == "last_key_shape":
        sd = dict(sd, **{"2.bias": mf.zeros(3)})
        pattern = (r"size mismatch for 2\.bias: copying a param with shape \(3,\) from checkpoint, the shape in "
                   r"current model is \(2,\)")
    elif case == "list_values":
        sd, pattern = {k: v.tolist() for k, v in sd.items()}, "0.weight: a list in the state dict"
    else:
        sd, pattern = list(sd.items()), "expected a mapping of names to tensors, got list"
    with pytest.raises((RuntimeError, TypeError), match=pattern):
        model.load_state_dict(sd)
    _same(before, _snapshot(model, opt))


# ---- empty inputs that are valid: an empty result, and gradients of the right shapes

@pytest.mark.parametrize("shape,fn", [
    ((2, 0), lambda x: F.softmax(x, dim=1)),  # used to raise NumPy's "cannot reshape array of size 0"
    ((0, 3), lambda x: F.log_softmax(x, dim=1)),
    ((2, 0), lambda x: nn.LayerNorm(0)(x)),  # ditto
    ((0, 3), lambda x: nn.LayerNorm(3)(x)),
    ((0, 3), lambda x: nn.RMSNorm(3)(x)),
    ((0, 3), lambda x: nn.Linear(3, 2)(x)),
    ((0, 1, 4, 4), lambda x: nn.AvgPool2d(2)(x)),
], ids=["softmax_empty_rows", "log_softmax_zero_batch", "layer_norm_empty_rows", "layer_norm_zero_batch",
        "rms_norm_zero_batch", "linear_zero_batch", "avg_pool_zero_batch"])
def test_empty_inputs_give_empty_outputs(shape, fn):
    x = t(*shape, requires_grad=True)
    y = fn(x)
    assert y.numel() == 0
    y.sum().backward()
    assert x.grad.shape == x.shape


def test_zero_batch_layer_norm_gives_zero_parameter_gradients():
    ln = nn.LayerNorm(3)
    ln(t(0, 3)).sum().backward()
    assert np.array_equal(ln.weight.grad.numpy(), np.zeros(3)) and np.array_equal(ln.bias.grad.numpy(), np.zeros(3))


@pytest.mark.skipif(mf.backend.cuda_available(), reason="checks the message where CUDA is missing")
def test_cuda_requested_without_cuda():
    with pytest.raises(RuntimeError, match="no usable CUDA device"):
        mf.zeros(2, device="cuda")


@pytest.mark.gpu
def test_mixed_devices_named():
    with pytest.raises(RuntimeError, match="on one device"):
        F.linear(t(2, 3), mf.randn(4, 3, device="cuda"))
    with pytest.raises(RuntimeError, match="target is on cpu but the input is on cuda"):
        F.cross_entropy(mf.randn(2, 3, device="cuda"), mf.tensor([0, 1], device="cpu"))
    with pytest.raises(RuntimeError, match="assigned grad is on"):
        nn.Parameter(t(2)).grad = mf.randn(2, device="cuda")


def test_save_interrupted_mid_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """A save killed while writing (here: KeyboardInterrupt after half the bytes) leaves the old
    file whole and no temporary file behind."""
    from minifused import serialization

    path = tmp_path / "run.ckpt"
    mf.save({"epoch": 1, "w": t(3)}, path)

    def half_then_interrupt(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(serialization.np, "savez", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        mf.save({"epoch": 2, "w": t(3)}, path)
    monkeypatch.undo()
    assert mf.load(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"]


# ---------------------------------------------------------------- gradients handed to autograd (PyTorch's rules)
@pytest.mark.parametrize("given", [np.float64, np.int64])
def test_backward_gradient_is_cast_to_the_tensor_dtype(device, given):
    x = mf.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    with pytest.raises(TypeError, match="gradients can be either Tensors or None, but got list"):
        (x * 2).backward([1, 2, 3])  # (no tensor: refused, as PyTorch)
    g = mf.tensor(np.array([1, 2, 3], dtype=given), device=device)
    (x * 2).backward(g)
    assert x.grad.dtype == mf.float32
    np.testing.assert_array_equal(x.grad.cpu().numpy(), [2.0, 4.0, 6.0])


def test_backward_gradient_of_the_wrong_shape_or_device_changes_nothing():
    x = mf.tensor([1.0, 2.0, 3.0], device="cpu", requires_grad=True)
    with pytest.raises(RuntimeError, match=r"backward\(\): Mismatch in shape: grad_output\[0\] has a shape of \(2,\) "
                                           r"and output\[0\] has a shape of \(3,\)"):
        (x * 2).backward(mf.ones(2, device="cpu"))
    assert x.grad is None
    for create_graph in (False, True):  # autograd.grad names itself
        with pytest.raises(RuntimeError, match=r"grad\(\): Mismatch in shape: grad_output\[1\] has a shape of \(2,\)"):
            mf.autograd.grad([x.sum(), x * 2], x, grad_outputs=[None, mf.ones(2)], create_graph=create_graph)
    if mf.cuda_available():
        with pytest.raises(RuntimeError, match="gradient is on cuda"):
            (x * 2).backward(mf.ones(3, device="cuda"))
        assert x.grad is None


def test_hook_result_is_checked(device):
    x = mf.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: (g * 2).to(mf.float64))
    with pytest.raises(RuntimeError, match="has changed the type of value"):  # (PyTorch's check)
        y.sum().backward()
    assert x.grad is None
    leaf = mf.tensor([1.0, 2.0], device=device, requires_grad=True)

    def wrong_shape(g):
        return mf.ones(3, device=device)

    leaf.register_hook(wrong_shape)
    with pytest.raises(RuntimeError, match=r"hook 'wrong_shape' has changed the size of value"):
        (leaf * 2).sum().backward()
    assert leaf.grad is None


def test_a_custom_backward_never_puts_another_dtype_on_a_leaf(device):
    x = mf.tensor([1.0, 2.0], device=device, requires_grad=True)
    doubling_function(lambda g: (g * 2).double()).apply(x).sum().backward()
    assert x.grad.dtype == mf.float32
    np.testing.assert_array_equal(x.grad.cpu().numpy(), [2.0, 2.0])
    w = mf.tensor([1.0, 2.0], device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"DoublingBackward returned an invalid gradient at index 0 - got \[1\] but "
                                           r"expected shape compatible with \[2\]"):
        (doubling_function(lambda g: g[:1]).apply(w) + w).sum().backward()
    assert w.grad is None


# ---------------------------------------------------------------- a non-tensor or a mismatched argument to a public op:
# PyTorch's exception type and a message naming the op, never an AttributeError or NumPy's words
@pytest.mark.parametrize("fn,exc,words", [
    (lambda: mf.sum([1.0, 2.0]), TypeError, r"sum\(\): argument 'input' must be a Tensor, not list"),
    (lambda: mf.exp(None), TypeError, r"exp\(\): argument '\w+' must be a Tensor, not NoneType"),
    (lambda: mf.zeros_like([1, 2]), TypeError, r"zeros_like\(\): argument '\w+' must be a Tensor, not list"),
    (lambda: mf.tril("x"), TypeError, r"tril\(\): argument '\w+' must be a Tensor, not str"),
    (lambda: F.relu([1.0]), TypeError, "relu: expected a tensor input, got list"),
    (lambda: mf.cat(mf.randn(2, device="cpu")), TypeError, "cat: expected a sequence .* of Tensors, got Tensor"),
    (lambda: mf.clamp(mf.randn(3, device="cpu"), mf.randn(4, device="cpu")), ValueError,
     r"clamp: shapes \(3,\) and \(4,\) cannot be broadcast together"),
    (lambda: mf.clamp(mf.randn(3, device="cpu"), "0"), TypeError, "clamp: min must be a number, a tensor or None"),
    (lambda: mf.full_like(mf.randn(3, device="cpu"), mf.randn(4, device="cpu")), TypeError,
     r"full_like: fill_value must be a number .* got Tensor\(4,\)"),
    (lambda: mf.randint(1.5, 4, (2,)), TypeError, "randint: low must be an int, got float"),
    (lambda: mf.from_dlpack([1, 2]), TypeError, "from_dlpack: expected an object with __dlpack__"),
    (lambda: mf.arange([1, 2]), TypeError, "arange: end must be a number, got list")])
def test_public_ops_name_themselves_for_wrong_arguments(fn, exc, words):
    with pytest.raises(exc, match=words):
        fn()


def test_cat_of_zero_dimensional_tensors_says_so():
    with pytest.raises(RuntimeError, match=r"cat: zero-dimensional tensor \(at position 0\) cannot be concatenated"):
        mf.cat([mf.tensor(1.0), mf.tensor(2.0)])
    assert mf.stack([mf.tensor(1.0), mf.tensor(2.0)]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("name,write", [("relu_", lambda v: F.relu_(v)), ("gelu_", lambda v: F.gelu_(v)),
                                        ("setitem", lambda v: v.__setitem__(0, 5.0))])
def test_in_place_through_a_view_of_a_grad_leaf_raises_and_leaves_it(name, write):
    leaf = mf.tensor(np.array([-1.0, 2.0, -3.0, 4.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match=f"{name}: a view of a leaf Variable that requires grad is being used in "
                                           f"an in-place operation"):
        write(leaf[1:3])
    assert leaf.numpy().tolist() == [-1.0, 2.0, -3.0, 4.0] and leaf._version == 0
    with mf.no_grad():  # allowed there, as in PyTorch
        write(leaf.view(2, 2)[1])


@pytest.mark.parametrize("fn,ours", [
    (lambda: nn.Linear(3, 2)(mf.ones(4, 5)), ValueError),
    (lambda: mf.ones(4, 3) @ mf.ones(5, 2), ValueError),
    (lambda: nn.Conv2d(3, 4, 3)(mf.ones(2, 5, 8, 8)), ValueError),
    (lambda: nn.BatchNorm1d(3)(mf.ones(4, 4)), ValueError),
    (lambda: mf.ones(3, 4).reshape(5, -1), ValueError),
    (lambda: mf.cat([mf.ones(2, 3), mf.ones(2, 4)]), ValueError),
    (lambda: mf.stack([mf.ones(2), mf.ones(3)]), ValueError),
    (lambda: mf.ones(2, 3).expand(4, 3), ValueError),
    (lambda: F.mse_loss(mf.ones(2, 3), mf.ones(3, 2)), ValueError),
    (lambda: nn.BatchNorm2d(2)(mf.ones(2, 2, 2, 2, dtype=mf.int64)), TypeError),
    (lambda: F.cross_entropy(mf.ones(2, 3), mf.tensor([0.0, 1.0])), TypeError),
    (lambda: F.cross_entropy(mf.ones(2, 3), mf.tensor([0, 3])), IndexError),  # (PyTorch's CPU; its CUDA's RuntimeError)
    (lambda: F.nll_loss(mf.ones(2, 3), mf.tensor([0, 3])), ValueError)])
def test_bad_shapes_and_dtypes_are_also_pytorchs_runtime_error(fn, ours):
    """PyTorch raises RuntimeError for most bad shapes and dtypes; minifused's ValueError / TypeError for them is
    also a RuntimeError, so a check written against either catches it."""
    with pytest.raises(RuntimeError) as e:
        fn()
    assert isinstance(e.value, ours)
