"""``torch.version`` as ``minifused.version``: ``__version__`` (minifused's, the package's metadata version),
``debug`` (False), ``hip`` / ``rocm`` / ``xpu`` (None: minifused runs on NumPy or CUDA only), and two values
found when first read: ``cuda``, the CUDA runtime's version as ``'major.minor'`` (``'13.0'``) where CuPy sees a
usable CUDA device, else None (PyTorch's value in a build without CUDA); ``git_version``, the commit of the
source tree minifused runs from when that is a git checkout, else ``'Unknown'`` (PyTorch's word for it)."""
from __future__ import annotations

import os

__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]

__version__ = "0.1.0"  # the version in pyproject.toml (what minifused.__version__ is)
debug = False
hip = None
rocm = None
xpu = None

_found = {}


def _cuda():
    from .. import backend

    if not backend.cuda_available():
        return None
    v = int(backend.cupy.cuda.runtime.runtimeGetVersion())  # 1000 * major + 10 * minor
    return f"{v // 1000}.{v % 1000 // 10}"


def _git_version():
    """The commit of the checkout holding the package, read from ``.git`` (no git process), or 'Unknown'."""
    git = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".git")
    try:
        with open(os.path.join(git, "HEAD")) as f:
            head = f.read().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if os.path.isfile(os.path.join(git, ref)):
            with open(os.path.join(git, ref)) as f:
                return f.read().strip()
        with open(os.path.join(git, "packed-refs")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        pass
    return "Unknown"


def __getattr__(name):
    if name in ("cuda", "git_version"):
        if name not in _found:
            _found[name] = _cuda() if name == "cuda" else _git_version()
        return _found[name]
    raise AttributeError(f"module 'minifused.version' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"cuda", "git_version"})
