"""``Parameter``: a tensor that a Module registers as learnable (its own module, so that
the state-dict code beneath Module can make one)."""
from __future__ import annotations

import numpy as np

from .. import backend
from ..kernels import copy_in_layout, is_channels_last
from ..tensor import Tensor


class Parameter(Tensor):
    """A tensor that a Module registers as a learnable parameter (requires grad by default)."""

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = np.empty(0, backend.float32)
        super().__init__(data._data if isinstance(data, Tensor) else data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        """A new Parameter of a copy of the data (in its layout) and the same ``requires_grad``, as PyTorch's
        ``Parameter.__deepcopy__``: no ``.grad`` (a copied model starts with none), no hooks."""
        found = memo.get(id(self))
        if found is None:
            data = self._data
            found = memo[id(self)] = type(self)._from_array(copy_in_layout(data, is_channels_last(data)),
                                                            self.requires_grad)
        return found
