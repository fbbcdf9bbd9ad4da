"""Layers and models: ``Module``, ``Parameter``, containers and layers."""
from .module import Module, ModuleDict, ModuleList, Parameter, Sequential  # noqa: F401
from .basic import GELU, Flatten, Identity, ReLU, Sigmoid, Tanh  # noqa: F401
