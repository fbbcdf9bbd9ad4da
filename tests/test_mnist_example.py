"""examples/mnist/train.py on the CPU: one MLP epoch on 2,000 images beats 80 % on 1,000 held-out
images; checkpoints, resume, plots and a checkpoint of another model."""
import gzip
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import minifused as mf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "mnist"))
import train  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"  # ../shared/data/mnist beside the checkout


def _synthetic(root, n_train=2000, n_test=1000):
    """Learnable stand-in digits: a fixed random stroke pattern per class plus noise, as IDX files."""
    rng = np.random.default_rng(0)
    templates = (rng.random((10, 28, 28)) < 0.15) * 200.0
    folder = root / "mnist"
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        imgs = np.clip(templates[labels] + rng.normal(0, 60, (n, 28, 28)), 0, 255).astype(np.uint8)
        (folder / f"{split}-images-idx3-ubyte.gz").write_bytes(
            gzip.compress(struct.pack(">IIII", 0x803, n, 28, 28) + imgs.tobytes()))
        (folder / f"{split}-labels-idx1-ubyte.gz").write_bytes(
            gzip.compress(struct.pack(">II", 0x801, n) + labels.tobytes()))
    return root


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    if (SHARED / "mnist" / "train-images-idx3-ubyte.gz").exists():
        return SHARED
    return _synthetic(tmp_path_factory.mktemp("data"))


QUICK = ["--device", "cpu", "--optimizer", "adam", "--schedule", "none", "--dropout", "0", "--no-progress"]


def test_one_epoch_mlp_on_2000_images(data_dir, tmp_path, capsys):
    ckpt, png = tmp_path / "run.ckpt", tmp_path / "curves.png"
    summary = train.main(QUICK + ["--data-dir", str(data_dir), "--limit", "2000", "--test-limit", "1000",
                                  "--epochs", "1", "--batch-size", "32", "--checkpoint", str(ckpt),
                                  "--plot", str(png)])
    assert summary["test_acc"] > 80.0
    out = capsys.readouterr().out
    assert "final: test accuracy" in out and "samples/s" in out and "s/epoch" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ck = mf.load(ckpt)
    assert ck["arch"] == "mlp" and ck["epoch"] == 0 and "fc1.weight" in ck["model"]
    assert ck["optimizer"]["state"][0]["step"] == 63


def test_resume_and_wrong_model(data_dir, tmp_path, capsys):
    ckpt = tmp_path / "run.ckpt"
    args = QUICK + ["--data-dir", str(data_dir), "--limit", "96", "--test-limit", "64", "--batch-size", "32",
                    "--checkpoint", str(ckpt)]
    full = train.main(args + ["--epochs", "2"])
    ckpt.unlink()
    train.main(args + ["--epochs", "1"])
    resumed = train.main(args + ["--epochs", "2", "--resume"])
    assert "resumed from" in capsys.readouterr().out
    assert resumed["history"]["train_loss"] == full["history"]["train_loss"]  # bitwise: same floats
    assert resumed["history"]["test_acc"] == full["history"]["test_acc"]
    with pytest.raises(SystemExit, match="checkpoint of model 'mlp', but --model cnn"):
        train.main(args + ["--epochs", "3", "--resume", "--model", "cnn"])


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_mixed_precision_trains_with_fp32_master_weights(data_dir, tmp_path, dtype):
    ckpt = tmp_path / "mp.ckpt"
    summary = train.main(QUICK + ["--data-dir", str(data_dir), "--limit", "1024", "--test-limit", "500",
                                  "--epochs", "1", "--batch-size", "32", "--dtype", dtype, "--checkpoint", str(ckpt)])
    assert summary["dtype"] == str(mf.backend.as_dtype(dtype)) and not summary["graphed"]  # cpu: eager
    assert summary["test_acc"] > 70.0
    ck = mf.load(ckpt)
    assert str(ck["model"]["fc1.weight"].dtype) == str(mf.backend.as_dtype(dtype))
    st = ck["optimizer"]["state"][0]
    assert st["master"].dtype == mf.float32 and st["exp_avg"].dtype == mf.float32 and st["step"] == 32
    assert (ck["scaler"]["scale"] > 0) if dtype == "fp16" else ck["scaler"] == {}


@pytest.mark.gpu
@pytest.mark.parametrize("extra", [[], ["--dtype", "bf16"], ["--dtype", "fp16"], ["--no-graph"]])
def test_gpu_mlp_with_dropout_and_cosine_schedule(data_dir, extra):
    """The default recipe's pieces on the GPU (graphed unless --no-graph): dropout masks change per
    replay, the cosine lr reaches the replayed update, low precision keeps up with fp32."""
    summary = train.main(["--device", "cuda", "--no-progress", "--data-dir", str(data_dir), "--limit", "2000",
                          "--test-limit", "1000", "--epochs", "3", "--batch-size", "32", *extra])
    print(extra, summary["test_acc"], summary["s_per_epoch"])  # 2000 / 32: a partial last batch each epoch
    assert summary["graphed"] == ("--no-graph" not in extra)
    assert summary["test_acc"] > 75.0


@pytest.mark.parametrize("argv,message", [
    (["--epochs", "0"], "argument --epochs: expected a positive integer, got '0'"),
    (["--limit", "-3"], "argument --limit: expected a positive integer, got '-3'"),
    (["--test-limit", "0"], "argument --test-limit: expected a positive integer"),
    (["--log-every", "0"], "argument --log-every: expected a positive integer"),
    (["--dtype", "fp8"], "--dtype fp8: expected float32, bf16 or fp16"),
    (["--dtype", "int32"], "--dtype int32: expected float32, bf16 or fp16"),
    (["--device", "tpu"], "--device tpu: unknown device 'tpu'"),
    (["--resume", "--checkpoint", "/nonexistent/run.ckpt"], "--resume: /nonexistent/run.ckpt does not exist"),
])
def test_bad_arguments_get_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "\n".join(err)


def test_resume_may_start_fresh_when_asked(tmp_path):
    args = train.parse_args(["--resume", "--allow-fresh", "--checkpoint", str(tmp_path / "new.ckpt")])
    assert args.resume and args.allow_fresh


def test_help_shows_every_default(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--help"])
    options = capsys.readouterr().out.split("options:")[1].split("\n  -")[1:]
    assert len(options) > 20
    assert [o.split()[0] for o in options if "default" not in o] == ["h,"]


def test_resnet_model_trains_a_step_and_has_pytorch_buffers():
    """The example's ResNet: BatchNorm buffers in its state dict, a training step on the cpu that moves the
    loss and the running statistics, and evaluation with the running statistics."""
    mf.manual_seed(0)
    model = train.build_model("resnet").to("cpu")
    sd = model.state_dict()
    assert "stem.1.running_mean" in sd and "stem.1.num_batches_tracked" in sd and "fc.weight" in sd
    opt = mf.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = mf.randn(8, 1, 28, 28, device="cpu"), mf.randint(0, 10, (8,), device="cpu")
    step = train.make_step(model, opt)
    first = float(step(x, y))
    for _ in range(5):
        last = float(step(x, y))
    assert last < first and float(model.stem[1].running_mean.abs().sum()) > 0
    model.eval()
    with mf.no_grad():
        assert model(x).shape == (8, 10)
