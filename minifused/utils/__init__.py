"""PyTorch's ``torch.utils`` spelling: ``minifused.utils.data`` is :mod:`minifused.data`'s loading API."""
from . import data  # noqa: F401
