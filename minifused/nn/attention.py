"""``torch.nn.attention``: :class:`SDPBackend` and the :func:`sdpa_kernel` context manager, which choose the
backends ``scaled_dot_product_attention`` may use. The switches are ``minifused.backends.cuda``'s
(``enable_flash_sdp`` ...); what a selection means for minifused's one attention implementation, and when it
leaves none to run, :func:`minifused.backends.check_sdp_backends` says."""
from __future__ import annotations

import contextlib
import enum

from .. import backends as _backends

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

#: PyTorch's switch for warnings on why its fused kernels were passed over, read by its attention-bias subclasses
#: (``torch.nn.attention.bias``), which minifused does not have: nothing reads it here.
WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.Enum):
    """The attention backends, PyTorch's names and values (``int(SDPBackend.MATH) == 0``; as PyTorch's, a member
    is not equal to its int)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __int__(self):
        return self.value


_SWITCHES = {name: SDPBackend(value) for name, value in _backends.SDP_BACKENDS.items()}  # switch name -> backend


def _current(with_priority=False):
    on = [backend for name, backend in _SWITCHES.items() if _backends._sdp[name]]
    if with_priority:
        on.sort(key=lambda backend: _backends._sdp_priority.index(int(backend)))
    return on


def _select(chosen, set_priority):
    for name, backend in _SWITCHES.items():
        _backends._sdp[name] = backend in chosen
    if set_priority:
        order = [int(backend) for backend in chosen]
        _backends._sdp_priority[:] = order + [b for b in _backends._sdp_priority if b not in order]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """``with sdpa_kernel(SDPBackend.FLASH_ATTENTION):`` (a backend or a list of them): inside, only those
    backends are enabled; on exit the switches come back. ``set_priority=True`` also makes the list's order the
    backends' priority, restored on exit likewise; minifused runs one implementation, so the order is recorded
    only (:func:`minifused.backends.check_sdp_backends` says which selections it runs under)."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError(f"Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    chosen = list(dict.fromkeys([backends] if isinstance(backends, SDPBackend) else backends))
    previous, priority = _current(set_priority), list(_backends._sdp_priority)
    try:
        _select(chosen, set_priority)
        yield {}
    finally:
        _select(previous, False)
        _backends._sdp_priority[:] = priority
