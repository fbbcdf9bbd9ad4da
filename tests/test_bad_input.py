"""A catalogue of bad input across the API (CPU): each case raises the named exception with
a message that names the problem, and leaves model weights and optimizer state unchanged."""
import gzip

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn, optim


def t(*shape, dtype=mf.float32, **kw):
    return mf.randn(*shape, dtype=dtype, device="cpu", **kw)


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
    # ops: shapes, dtypes, indexing
    ("add_broadcast", lambda: t(2, 3) + t(4), ValueError, r"add: shapes \(2, 3\) and \(4,\)"),
    ("where_broadcast", lambda: mf.where(t(2, 3) > 0, t(2, 3), t(5)), ValueError, r"where: shapes"),
    ("matmul_inner", lambda: t(2, 3) @ t(4, 5), ValueError, r"matmul: shapes \(2, 3\) and \(4, 5\)"),
    ("matmul_0d", lambda: t() @ t(3), ValueError, "at least one dimension"),
    ("matmul_batch", lambda: t(2, 3, 4) @ t(5, 4, 2), ValueError, "cannot be broadcast"),
    ("reshape_size", lambda: t(2, 3).reshape(4, 2), ValueError, r"reshape: shape \(4, 2\) is invalid"),
    ("reshape_two_infer", lambda: t(4).reshape(-1, -1), ValueError, "invalid shape"),
    ("sum_dim_range", lambda: t(2, 3).sum(2), IndexError, "dimension 2 out of range"),
    ("permute_not_perm", lambda: t(2, 3).permute(0, 0), ValueError, "not a permutation"),
    ("index_range", lambda: t(2, 3)[2], IndexError, "out of range"),
    ("index_array_range", lambda: t(2, 3)[mf.tensor([0, 7])], IndexError, "out of range"),
    ("index_float_array", lambda: t(2, 3)[mf.tensor([0.5])], IndexError, "integer or bool"),
    ("index_mask_shape", lambda: t(2, 3)[mf.tensor([True, False, True])], IndexError, "mask"),
    ("index_too_many", lambda: t(2, 3)[0, 0, 0], IndexError, "too many indices"),
    ("cat_shapes", lambda: mf.cat([t(2, 3), t(2, 4)], 0), ValueError, "differ outside dimension 0"),
    ("stack_shapes", lambda: mf.stack([t(2), t(3)]), ValueError, "same shape"),
    ("cat_empty", lambda: mf.cat([]), ValueError, "non-empty"),
    ("max_empty", lambda: mf.zeros(0).max(), ValueError, "empty dimension"),
    ("mean_int", lambda: mf.tensor([1, 2]).mean(), TypeError, "floating point"),
    ("clamp_no_bounds", lambda: t(3).clamp(), ValueError, "at least one of min and max"),
    ("gelu_mode", lambda: mf.gelu(t(3), approximate="cubic"), ValueError, "approximate"),
    ("item_many", lambda: t(3).item(), ValueError, "one-element"),
    ("bool_ambiguous", lambda: bool(t(3)), RuntimeError, "ambiguous"),
    ("dtype_name", lambda: mf.zeros(2, dtype="float12"), TypeError, "unknown dtype"),
    ("randint_range", lambda: mf.randint(5, 5, (2,)), ValueError, "low < high"),
    ("arange_step", lambda: mf.arange(0, 3, 0), ValueError, "step must be nonzero"),
    ("negative_shape", lambda: mf.zeros(-1), ValueError, "non-negative"),
    # autograd
    ("int_requires_grad", lambda: mf.tensor([1, 2], requires_grad=True), TypeError, "floating-point"),
    ("nonscalar_backward", lambda: (t(3, requires_grad=True) * 2).backward(), RuntimeError, "scalar"),
    ("backward_no_grad", lambda: t(3).sum().backward(), RuntimeError, "does not require grad"),
    ("backward_twice", backward_twice, RuntimeError, "second time"),
    ("leaf_inplace", lambda: t(3, requires_grad=True).add_(1), RuntimeError, "in-place"),
    ("gradient_shape", lambda: (t(3, requires_grad=True) * 2).backward(mf.ones(4)), RuntimeError,
     r"gradient has shape \(4,\)"),
    # layers and functional
    ("linear_features", lambda: F.linear(t(2, 3), t(4, 5)), ValueError, "in_features=5"),
    ("linear_dtype", lambda: F.linear(t(2, 3), t(4, 3, dtype=mf.float16)), TypeError, "same dtype"),
    ("linear_activation", lambda: nn.Linear(3, 4, activation="tanh"), ValueError, "activation"),
    ("conv_channels", lambda: F.conv2d(t(1, 3, 5, 5), t(4, 2, 3, 3)), ValueError, "channel"),
    ("conv_not_4d", lambda: F.conv2d(t(3, 5, 5), t(4, 3, 3, 3)), ValueError, "4-D|4D|dimensions"),
    ("conv_kernel_too_big", lambda: F.conv2d(t(1, 1, 2, 2), t(1, 1, 3, 3)), ValueError, "kernel|larger"),
    ("conv_stride", lambda: F.conv2d(t(1, 1, 5, 5), t(1, 1, 3, 3), stride=0), ValueError, "stride"),
    ("conv_module_kernel", lambda: nn.Conv2d(1, 2, 0), ValueError, "kernel_size"),
    ("layer_norm_shape", lambda: F.layer_norm(t(2, 3), (4,)), ValueError, "normalized_shape"),
    ("dropout_p", lambda: nn.Dropout(1.5), ValueError, "between 0 and 1"),
    ("xent_label_range", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 3])), ValueError, "out of"),
    ("xent_target_dtype", lambda: F.cross_entropy(t(2, 3), mf.tensor([0.0, 1.0])), (TypeError, ValueError,
                                                                                     NotImplementedError),
     "target|probabilit"),
    ("xent_target_shape", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 1, 2])), ValueError, "target"),
    ("xent_reduction", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 1]), reduction="avg"), ValueError,
     "reduction"),
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
    ("load_missing", lambda: mf.load("/nonexistent/ckpt.npz"), FileNotFoundError, "no such file"),
    ("save_unsupported", lambda: mf.save({"f": object()}, "/tmp/never.npz"), TypeError, "cannot store"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case):
    _, fn, exc, pattern = case
    with pytest.raises(exc, match=pattern):
        fn()


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


def test_failed_calls_leave_model_and_optimizer_unchanged():
    mf.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    opt = optim.Adam(model.parameters(), lr=0.1)
    F.cross_entropy(model(t(5, 4)), mf.tensor([0, 1, 0, 1, 1])).backward()
    opt.step()
    before = _snapshot(model, opt)
    with pytest.raises(ValueError):
        model(t(5, 7))  # wrong in_features
    with pytest.raises(ValueError):
        F.cross_entropy(model(t(2, 4)), mf.tensor([0, 5]))  # label out of range
    with pytest.raises(RuntimeError, match="size|shape"):
        bad = model.state_dict()
        bad["0.weight"] = mf.zeros(9, 9)
        model.load_state_dict(bad)
    with pytest.raises(RuntimeError, match="unexpected|missing"):
        model.load_state_dict({"nope": mf.zeros(1)})
    with pytest.raises(ValueError):
        other = optim.Adam(nn.Linear(9, 9).parameters())
        other.step()
        opt.load_state_dict(other.state_dict())
    _same(before, _snapshot(model, opt))
