"""``minifused.linalg``: the functions PyTorch keeps under ``torch.linalg`` (the vector norm so far)."""
from .reduce import vector_norm

__all__ = ["vector_norm"]
