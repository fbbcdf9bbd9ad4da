"""PyTorch's ``torch.utils`` spelling: ``minifused.utils.data`` is :mod:`minifused.data`'s loading API."""
from . import checkpoint, data  # noqa: F401
