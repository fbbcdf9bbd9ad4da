"""PyTorch's module paths under minifused's name, so that code importing a name from where PyTorch keeps it runs
with ``torch`` spelled ``minifused``: ``from torch.utils.data.sampler import SubsetRandomSampler``, ``from
torch.nn.modules.loss import _Loss``, ``from torch.nn.parameter import Parameter``, ``import torch.backends.cudnn
as cudnn``, ``from torch.cuda.amp import autocast``, ``from torch.distributions.normal import Normal`` ...

Each path is registered in ``sys.modules`` (and as an attribute of its parent) as the minifused module that holds
those names or as a module object made here from them. Either way the names are minifused's own objects (the same
classes, the same flag objects: ``cudnn.benchmark = True`` through either spelling sets the one switch). Run once,
at the end of ``minifused/__init__.py`` (this module sits above every other)."""
from __future__ import annotations

import abc
import collections.abc
import itertools
import sys
import types
from typing import Union

import numpy as np

from . import amp, backend, backends, cuda, distributions, nn, profiler
from .autograd import Function
from .autograd.higher import once_differentiable
from .autograd.tape import FunctionCtx
from .data import dataset as _dataset, loader as _loader, sampler as _sampler
from .nn import dropout as _dropout, layers as _layers, module as _module, parametrizations, parametrize, pool as _pool
from .nn.state_dicts import consume_prefix_in_state_dict_if_present
from .nn.activation import _Loss
from .nn.loss import _WeightedLoss
from .nn.norm import _BatchNorm, _InstanceNorm, _NormBase
from .ops import linalg

_ROOT = __name__.rpartition(".")[0]


def _ntuple(n, name="parse"):
    """PyTorch's ``nn.modules.utils._ntuple``: an iterable as a tuple, anything else repeated ``n`` times."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(itertools.repeat(x, n))

    parse.__name__ = name
    return parse


class _ConvNd(nn.Module, metaclass=abc.ABCMeta):
    """PyTorch's ``nn.modules.conv._ConvNd``, for ``isinstance(m, _ConvNd)``: true of every convolution layer,
    ``Conv1d/2d/3d``, ``ConvTranspose1d/2d/3d`` and their subclasses (the lazy ones), as in PyTorch; minifused's
    layers do not share a base class, so they are registered here as its virtual subclasses."""


class _ConvTransposeNd(_ConvNd):
    """PyTorch's ``nn.modules.conv._ConvTransposeNd``: true of ``ConvTranspose1d/2d/3d`` and their subclasses."""


def _register(path, obj, doc=None, replace=False):
    """``obj`` (a module or other object, or a dict of names made into a module) as ``minifused.<path>``."""
    full = f"{_ROOT}.{path}"
    if isinstance(obj, dict):
        module = types.ModuleType(full, doc)
        module.__dict__.update(obj)
        obj = module
    sys.modules.setdefault(full, obj)
    parent_path, _, leaf = full.rpartition(".")
    parent = sys.modules[parent_path]
    if replace or not hasattr(parent, leaf):
        setattr(parent, leaf, sys.modules[full])


def _public(module):
    return {k: v for k, v in vars(module).items() if not k.startswith("_") and not isinstance(v, types.ModuleType)}


def register_all():
    for dims in ("1d", "2d", "3d"):
        _ConvNd.register(getattr(nn, f"Conv{dims}"))
        _ConvTransposeNd.register(getattr(nn, f"ConvTranspose{dims}"))
    _register("linalg", linalg)
    for name in ("cudnn", "cuda", "mps"):
        _register(f"backends.{name}", getattr(backends, name))
    # torch.cuda.amp (a namespace of cuda.py's until now): its autocast / GradScaler, and amp's custom_fwd / bwd
    _register("cuda.amp", {"autocast": cuda.amp.autocast, "GradScaler": cuda.amp.GradScaler,
                           "custom_fwd": amp.custom_fwd, "custom_bwd": amp.custom_bwd},
              "``torch.cuda.amp``: autocast (float16) and GradScaler on 'cuda', as PyTorch's older spellings.",
              replace=True)
    _register("autograd.function", {"Function": Function, "FunctionCtx": FunctionCtx,
                                     "once_differentiable": once_differentiable})
    # torch.autograd.profiler: the legacy profile (its table lists every event) and the one record_function
    _register("autograd.profiler", {"profile": profiler._AutogradProfile, "record_function": profiler.record_function,
                                     "EventList": profiler.EventList, "FunctionEvent": profiler.FunctionEvent,
                                     "FunctionEventAvg": profiler.FunctionEventAvg})
    # torch.nn.parameter, torch.nn.common_types, torch.nn.modules and its submodules
    _register("nn.parameter", {name: getattr(nn, name) for name in
                               ("Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer")})
    size = {f"_size_{n}_t": Union[int, tuple] for n in ("1", "2", "3", "4", "5", "6", "any")}
    _register("nn.common_types", {**size, "_ratio_2_t": Union[float, tuple], "_ratio_3_t": Union[float, tuple],
                                  "_ratio_any_t": Union[float, tuple], "_maybe_indices_t": Union[object, tuple]})
    layers = _public(nn)
    _register("nn.modules", layers, "``torch.nn.modules``: the layers, as ``minifused.nn`` has them.")
    extras = {"loss": {"_Loss": _Loss, "_WeightedLoss": _WeightedLoss},
              "batchnorm": {"_BatchNorm": _BatchNorm, "_NormBase": _NormBase},
              "instancenorm": {"_InstanceNorm": _InstanceNorm, "_NormBase": _NormBase},
              "conv": {"_ConvNd": _ConvNd, "_ConvTransposeNd": _ConvTransposeNd},
              "pooling": {"_MaxPoolNd": _pool._MaxPoolNd, "_AvgPoolNd": _pool._AvgPoolNd, "_LPPoolNd": _pool._LPPoolNd,
                          "_MaxUnpoolNd": _pool._MaxUnpoolNd, "_AdaptiveAvgPoolNd": _layers._AdaptiveAvgPoolNd,
                          "_AdaptiveMaxPoolNd": _layers._AdaptiveMaxPoolNd},
              "dropout": {"_DropoutNd": _dropout._DropoutNd},
              "padding": {name: getattr(_layers, name) for name in
                          ("_ConstantPadNd", "_ReflectionPadNd", "_ReplicationPadNd", "_CircularPadNd")},
              "utils": {"_ntuple": _ntuple, "_single": _ntuple(1, "_single"), "_pair": _ntuple(2, "_pair"),
                        "_triple": _ntuple(3, "_triple"), "_quadruple": _ntuple(4, "_quadruple"),
                        "consume_prefix_in_state_dict_if_present": consume_prefix_in_state_dict_if_present},
              "module": {name: getattr(_module, name) for name in
                         ("register_module_forward_hook", "register_module_forward_pre_hook", "RemovableHandle",
                          "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
                          "register_module_buffer_registration_hook", "register_module_module_registration_hook",
                          "register_module_parameter_registration_hook")}}
    for sub in ("module", "loss", "conv", "linear", "activation", "batchnorm", "instancenorm", "normalization",
                "pooling", "dropout", "container", "sparse", "rnn", "transformer", "padding", "pixelshuffle",
                "upsampling", "flatten", "distance", "fold", "channelshuffle", "lazy", "utils",
                "linear_cross_entropy_options"):
        _register(f"nn.modules.{sub}", {**layers, **extras.get(sub, {})})
    _register("nn.utils.parametrizations", parametrizations)
    _register("nn.utils.parametrize", parametrize)
    # torch.nn.utils' own modules, by their dotted names (``from torch.nn.utils.fusion import fuse_conv_bn_eval``)
    utils = nn.utils
    _register("nn.utils.fusion", nn.fusion)
    for sub, names in (("clip_grad", ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
                                      "clip_grads_with_norm_")),
                       ("convert_parameters", ("parameters_to_vector", "vector_to_parameters")),
                       ("weight_norm", ("weight_norm", "remove_weight_norm")),
                       ("spectral_norm", ("spectral_norm", "remove_spectral_norm")),
                       ("memory_format", ("convert_conv2d_weight_memory_format",))):
        _register(f"nn.utils.{sub}", {name: getattr(utils, name) for name in names})
    # torch.distributions.<family>: each family's module by PyTorch's name
    dists = _public(distributions)
    for sub in ("normal", "uniform", "bernoulli", "categorical", "one_hot_categorical", "exponential", "laplace",
                "cauchy", "beta", "gamma", "dirichlet", "log_normal", "gumbel", "poisson", "binomial", "geometric",
                "multivariate_normal", "independent", "transformed_distribution", "kl", "half_normal", "half_cauchy",
                "chi2", "studentT", "pareto", "weibull", "kumaraswamy", "inverse_gamma", "multinomial",
                "negative_binomial", "mixture_same_family", "continuous_bernoulli"):
        _register(f"distributions.{sub}", dists)
    relaxed = {**dists, **_public(sys.modules[f"{_ROOT}.distributions.relaxed"])}  # (+ the Logit / Exp helpers)
    for sub in ("relaxed_bernoulli", "relaxed_categorical"):
        _register(f"distributions.{sub}", relaxed)
    # torch.utils.hooks: the handle type hook registrations return (``-> RemovableHandle`` annotations)
    _register("utils.hooks", {"RemovableHandle": _module.RemovableHandle})
    # torch.utils.data's modules
    _register("utils.data.sampler", _sampler)
    _register("utils.data.dataset", {**_public(_dataset), "TensorDataset": _loader.TensorDataset})
    _register("utils.data.dataloader", _loader)
    collate = {name: getattr(_loader, name)
               for name in ("default_collate", "default_convert", "collate", "default_collate_fn_map")}
    _register("utils.data._utils", {"collate": types.SimpleNamespace(**collate)})
    _register("utils.data._utils.collate", collate, replace=True)
    _register("types", {"Number": Union[int, float, bool], "_int": int, "_float": float, "_bool": bool,
                        "_size": tuple, "_dtype": np.dtype, "_device": backend.Device,
                        "Device": Union[backend.Device, str, int, None]},
              "``torch.types``: the type aliases annotations use.")
    # torch.cpu.amp: the deprecated cpu spellings of autocast / GradScaler (``from torch.cpu.amp import autocast``)
    cpu_amp = sys.modules[f"{_ROOT}.cpu"].amp
    _register("cpu.amp", {"autocast": cpu_amp.autocast, "GradScaler": cpu_amp.GradScaler},
              "``torch.cpu.amp``: autocast (bfloat16) and GradScaler on 'cpu', PyTorch's deprecated spellings.",
              replace=True)
