"""PyTorch's module paths under minifused's name: each import below is valid PyTorch 2.14 (checked there), and with
``torch`` spelled ``minifused`` it gives minifused's own objects."""
import importlib

import numpy as np
import pytest

import minifused as mf

IMPORTS = [
    ("minifused.utils.data.sampler", ["SubsetRandomSampler", "WeightedRandomSampler", "Sampler", "BatchSampler"]),
    ("minifused.utils.data.dataset", ["Dataset", "random_split", "Subset", "TensorDataset", "ConcatDataset"]),
    ("minifused.utils.data.dataloader", ["default_collate", "DataLoader", "get_worker_info"]),
    ("minifused.utils.data._utils.collate", ["default_collate", "default_convert"]),
    ("minifused.nn.modules.loss", ["_Loss", "_WeightedLoss", "CrossEntropyLoss"]),
    ("minifused.nn.modules.module", ["Module"]),
    ("minifused.nn.modules.batchnorm", ["_BatchNorm", "BatchNorm2d"]),
    ("minifused.nn.modules.instancenorm", ["_InstanceNorm"]),
    ("minifused.nn.modules.utils", ["_single", "_pair", "_triple", "_quadruple"]),
    ("minifused.nn.modules", ["Module", "Linear"]),
    ("minifused.nn.modules.activation", ["MultiheadAttention", "ReLU"]),
    ("minifused.nn.modules.transformer", ["TransformerEncoderLayer"]),
    ("minifused.nn.modules.container", ["Sequential", "ModuleList"]),
    ("minifused.nn.modules.linear", ["Linear", "Identity"]),
    ("minifused.nn.modules.conv", ["Conv2d"]),
    ("minifused.nn.modules.pooling", ["MaxPool2d"]),
    ("minifused.nn.modules.normalization", ["LayerNorm"]),
    ("minifused.nn.parameter", ["Parameter", "Buffer", "UninitializedParameter"]),
    ("minifused.nn.common_types", ["_size_2_t"]),
    ("minifused.nn.utils.parametrizations", ["weight_norm", "spectral_norm"]),
    ("minifused.nn.utils.parametrize", ["register_parametrization"]),
    ("minifused.optim.lr_scheduler", ["_LRScheduler", "LRScheduler"]),
    ("minifused.autograd.function", ["Function"]),
    ("minifused.cuda.amp", ["autocast", "GradScaler"]),
    ("minifused.linalg", ["norm", "inv", "solve"]),
    ("minifused.distributions.normal", ["Normal"]),
    ("minifused.distributions.categorical", ["Categorical"]),
    ("minifused.distributions.multivariate_normal", ["MultivariateNormal"]),
    ("minifused.distributions.kl", ["kl_divergence", "register_kl"]),
    ("minifused.types", ["Number"]),
    ("minifused.utils.hooks", ["RemovableHandle"]),
]


@pytest.mark.parametrize("path,names", IMPORTS, ids=[p for p, _ in IMPORTS])
def test_pytorch_module_paths_import(path, names):
    namespace = {}
    exec(f"from {path} import {', '.join(names)}", namespace)  # noqa: S102 - the import statement itself
    assert all(namespace[n] is not None for n in names)
    assert importlib.import_module(path) is not None


def test_the_names_are_minifuseds_own_objects():
    from minifused.cuda.amp import autocast
    from minifused.distributions.normal import Normal
    from minifused.nn.modules.loss import _Loss
    from minifused.nn.parameter import Parameter
    from minifused.utils.data.dataset import TensorDataset
    from minifused.utils.data.sampler import SubsetRandomSampler

    assert SubsetRandomSampler is mf.utils.data.SubsetRandomSampler and TensorDataset is mf.utils.data.TensorDataset
    assert Parameter is mf.nn.Parameter and Normal is mf.distributions.Normal
    assert issubclass(mf.nn.CTCLoss, _Loss) and autocast is mf.cuda.amp.autocast


def test_cudnn_imported_by_its_path_is_the_one_switch():
    import minifused.backends.cudnn as cudnn

    before = mf.backends.cudnn.benchmark
    try:
        cudnn.benchmark = not before
        assert mf.backends.cudnn.benchmark is (not before)
    finally:
        cudnn.benchmark = before


def test_ntuple_helpers_are_pytorchs():
    from minifused.nn.modules.utils import _pair, _quadruple, _single, _triple

    assert _pair(3) == (3, 3) and _pair((1, 2)) == (1, 2) and _single(4) == (4,)
    assert _triple([1, 2, 3]) == (1, 2, 3) and _quadruple(0) == (0, 0, 0, 0)


def test_custom_loss_and_scheduler_written_against_the_private_bases():
    from minifused.nn.modules.loss import _Loss
    from minifused.optim.lr_scheduler import _LRScheduler

    class Halved(_Loss):
        def forward(self, a, b):
            d = ((a - b) ** 2) / 2
            return d.mean() if self.reduction == "mean" else d.sum()

    a, b = mf.tensor([1.0, 3.0], device="cpu"), mf.tensor([0.0, 0.0], device="cpu")
    assert Halved().reduction == "mean" and Halved()(a, b).item() == 2.5
    assert Halved(reduction="sum")(a, b).item() == 5.0

    class Warmup(_LRScheduler):
        def get_lr(self):
            return [base * min(1.0, (self.last_epoch + 1) / 4) for base in self.base_lrs]

    p = mf.nn.Parameter(mf.zeros(2, device="cpu"))
    opt = mf.optim.SGD([p], lr=0.4)
    sched = Warmup(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    np.testing.assert_allclose(lrs, [0.1, 0.2, 0.3, 0.4, 0.4])


def test_hook_handles_are_utils_hooks_removable_handles():
    from minifused.utils.hooks import RemovableHandle

    handle = mf.nn.Linear(1, 1, device="cpu").register_forward_hook(lambda *args: None)
    assert isinstance(handle, RemovableHandle)
