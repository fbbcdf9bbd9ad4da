"""(being written)"""
__all__ = []
METHODS = {}  # Tensor methods and operators this module adds (ops/__init__ attaches them)
