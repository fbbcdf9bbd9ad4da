"""The fuzzed equivalence tests of test_fuzz_cpu.py, run on the CUDA kernels: the same properties,
strategies, float64 references and per-dtype tolerances, with every tensor on the GPU. Run with
``MINIFUSED_HYPOTHESIS=gpu`` for 300 examples per primitive."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")
sys.path.insert(0, str(Path(__file__).parent))
import test_fuzz_cpu as fuzz  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _on_gpu(monkeypatch):
    monkeypatch.setattr(fuzz, "DEVICE", "cuda")


test_norm_gpu = fuzz.test_norm_matches_float64
test_softmax_gpu = fuzz.test_softmax_matches_float64
test_class_losses_gpu = fuzz.test_class_losses_match_float64
test_linear_epilogs_gpu = fuzz.test_linear_epilogs_match_float64
test_conv2d_gpu = fuzz.test_conv2d_matches_direct_loop
test_pooling_gpu = fuzz.test_pooling_matches_direct_loop
test_dropout_gpu = fuzz.test_dropout_keeps_or_scales_and_backward_uses_the_same_mask
test_optimizer_updates_gpu = fuzz.test_optimizer_updates_match_float64
