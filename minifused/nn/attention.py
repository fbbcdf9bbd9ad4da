"""``torch.nn.attention``: :class:`SDPBackend` and the :func:`sdpa_kernel` context manager, which choose the
backends ``scaled_dot_product_attention`` may use. The switches are ``minifused.backends.cuda``'s
(``enable_flash_sdp`` ...); what a selection means for minifused's one attention implementation, and when it
leaves none to run, :func:`minifused.backends.check_sdp_backends` says."""
from __future__ import annotations

from ..backends import WARN_FOR_UNFUSED_KERNELS, SDPBackend, sdpa_kernel  # noqa: F401 - beside the switches

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]
