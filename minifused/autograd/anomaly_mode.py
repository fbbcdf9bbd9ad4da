"""``torch.autograd.anomaly_mode``: ``detect_anomaly`` and ``set_detect_anomaly`` where PyTorch keeps them; the
same objects as ``minifused.autograd``'s (see ``modes``)."""
from __future__ import annotations

from .modes import detect_anomaly, set_detect_anomaly

__all__ = ["detect_anomaly", "set_detect_anomaly"]
