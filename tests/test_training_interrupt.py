"""Killing examples/mnist/train.py mid-epoch (SIGTERM, SIGKILL) loses at most that epoch: the
checkpoint on disk is always a whole one, and --resume continues after its epoch."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import minifused as mf

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "mnist" / "train.py"
SHARED = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    if (SHARED / "mnist" / "train-images-idx3-ubyte.gz").exists():
        return SHARED
    sys.path.insert(0, str(Path(__file__).parent))
    from test_mnist_example import _synthetic

    return _synthetic(tmp_path_factory.mktemp("data"), n_train=4000, n_test=500)


def _args(data_dir, ckpt, epochs):
    return [sys.executable, str(TRAIN), "--device", "cpu", "--data-dir", str(data_dir), "--limit", "4000",
            "--test-limit", "500", "--epochs", str(epochs), "--batch-size", "64", "--checkpoint", str(ckpt),
            "--no-progress", "--seed", "0"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_kill_mid_epoch_then_resume(sig, data_dir, tmp_path):
    ckpt = tmp_path / "run.ckpt"
    proc = subprocess.Popen(_args(data_dir, ckpt, 20), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not ckpt.exists():  # the first epoch's checkpoint appears; epoch 2 is under way
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0  # it was stopped, not finished
    saved = mf.load(str(ckpt))  # a whole checkpoint, never a half-written one
    done = int(saved["epoch"]) + 1  # the checkpoint holds the 0-based index of the last finished epoch
    assert 1 <= done < 20 and len(saved["history"]["train_loss"]) == done
    out = subprocess.run(_args(data_dir, ckpt, done + 1) + ["--resume"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"after epoch {done}" in out.stdout
    resumed = mf.load(str(ckpt))
    assert int(resumed["epoch"]) + 1 == done + 1 and len(resumed["history"]["train_loss"]) == done + 1
