"""Common MLP and CNN training steps, written once as PyTorch users write them, run with minifused and with PyTorch.

The models (built from ``T``: ``minifused`` or ``torch``): an MLP with LayerNorm, GELU and dropout (AdamW), one with
BatchNorm1d (AdamW), VGG-11 with BatchNorm, MobileNetV2 (depthwise convolutions), a ResNeXt (grouped convolutions), a
DenseNet (concatenations), a GroupNorm+SiLU CNN (AdamW) and a convolutional autoencoder (ConvTranspose2d, LeakyReLU,
Sigmoid, MSE; Adam): CIFAR-sized 3x32x32 inputs (MNIST-sized for the MLPs), synthetic, resident on the GPU (four
batches in turn).

* minifused: the code as written (no channels_last; ``autocast`` for bf16);
* PyTorch at its strongest for eager steps: channels_last for the CNNs, ``cudnn.benchmark``, fused optimizers, TF32
  off (fp32 is strict fp32, as ours), ``autocast`` for bf16.

Eager steps, and whole steps replayed from CUDA graphs: ours through ``capture_step``, PyTorch's captured as it
documents (static inputs, capturable optimizers: foreach SGD, fused capturable Adam/AdamW; autocast's cache off).
Steps/s are timed with CUDA events over ``--steps`` steps after a warm-up, the two frameworks in alternating
rounds; each ratio ``zoo_<model>_<dtype>_<eager|graph>_over_torch_<eager|graph>`` (> 1: minifused is faster) is
the median of the rounds' own ratios.
Peak memory is each allocator's peak over the model's run. The ``fp32 loss after 3 steps`` rows check the same
math: both frameworks from the same weights and batches (dropout off, plain optimizers), their losses' largest
relative difference.

    python bench/zoo.py [--models mlp_ln,vgg11,...] [--modes eager,graph] [--steps 20] [--rounds 5]
"""
from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import minifused as mf  # noqa: E402
from harness import Results, torch_or_none  # noqa: E402
from resnet import steps_per_s  # noqa: E402


# ---------------------------------------------------------------- the models, in either framework
def mlp_ln(T, p=0.1):
    nn = T.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 2048), nn.LayerNorm(2048), nn.GELU(), nn.Dropout(p),
                         nn.Linear(2048, 2048), nn.LayerNorm(2048), nn.GELU(), nn.Dropout(p), nn.Linear(2048, 10))


def mlp_bn(T, p=0.1):
    nn = T.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.BatchNorm1d(1024), nn.ReLU(), nn.Dropout(p),
                         nn.Linear(1024, 1024), nn.BatchNorm1d(1024), nn.ReLU(), nn.Dropout(p), nn.Linear(1024, 10))


def vgg11(T, p=0.1):
    nn = T.nn
    layers, c = [], 3
    for v in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            c = v
    return nn.Sequential(*layers, nn.Flatten(), nn.Dropout(p), nn.Linear(512, 10))


def mobilenetv2(T, p=0.1):
    nn = T.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, expansion, stride):
            super().__init__()
            planes = expansion * cin
            self.stride = stride
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, groups=planes, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride == 1 and cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            F = T.nn.functional
            out = F.relu(self.bn1(self.conv1(x)))
            out = F.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return out + self.shortcut(x) if self.stride == 1 else out

    cfg = [(1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 32, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(32)
            layers, cin = [], 32
            for e, cout, n, s in cfg:
                for st in [s] + [1] * (n - 1):
                    layers.append(Block(cin, cout, e, st))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.conv2 = nn.Conv2d(320, 1280, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(1280)
            self.drop = nn.Dropout(p)
            self.linear = nn.Linear(1280, 10)

        def forward(self, x):
            F = T.nn.functional
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layers(out)
            out = F.relu(self.bn2(self.conv2(out)))
            out = F.avg_pool2d(out, 4).view(out.size(0), -1)
            return self.linear(self.drop(out))
    return Net()


def resnext(T, p=0.0):
    nn = T.nn
    F = T.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, card, width, stride):
            super().__init__()
            gw = card * width
            self.conv1 = nn.Conv2d(cin, gw, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(gw)
            self.conv2 = nn.Conv2d(gw, gw, 3, stride, 1, groups=card, bias=False)
            self.bn2 = nn.BatchNorm2d(gw)
            self.conv3 = nn.Conv2d(gw, 2 * gw, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(2 * gw)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != 2 * gw:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, 2 * gw, 1, stride, bias=False), nn.BatchNorm2d(2 * gw))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = F.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return F.relu(out + self.shortcut(x))

    class Net(nn.Module):
        def __init__(self, card=8, width=16):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            layers, cin = [], 64
            for stride in (1, 2, 2):
                for st in [stride, 1, 1]:
                    layers.append(Block(cin, card, width, st))
                    cin = 2 * card * width
                width *= 2
            self.layers = nn.Sequential(*layers)
            self.linear = nn.Linear(cin, 10)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layers(out)
            out = F.adaptive_avg_pool2d(out, 1).flatten(1)
            return self.linear(out)
    return Net()


def densenet(T, p=0.0):
    nn = T.nn
    F = T.nn.functional

    class Bottleneck(nn.Module):
        def __init__(self, cin, g):
            super().__init__()
            self.bn1 = nn.BatchNorm2d(cin)
            self.conv1 = nn.Conv2d(cin, 4 * g, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(4 * g)
            self.conv2 = nn.Conv2d(4 * g, g, 3, padding=1, bias=False)

        def forward(self, x):
            out = self.conv1(F.relu(self.bn1(x)))
            out = self.conv2(F.relu(self.bn2(out)))
            return T.cat([out, x], 1)

    class Net(nn.Module):
        def __init__(self, g=12, blocks=(6, 12, 24)):
            super().__init__()
            c = 2 * g
            self.conv1 = nn.Conv2d(3, c, 3, padding=1, bias=False)
            mods = []
            for i, n in enumerate(blocks):
                for _ in range(n):
                    mods.append(Bottleneck(c, g))
                    c += g
                if i != len(blocks) - 1:
                    out = c // 2
                    mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, out, 1, bias=False), nn.AvgPool2d(2)]
                    c = out
            self.features = nn.Sequential(*mods)
            self.bn = nn.BatchNorm2d(c)
            self.linear = nn.Linear(c, 10)

        def forward(self, x):
            out = self.features(self.conv1(x))
            out = F.adaptive_avg_pool2d(F.relu(self.bn(out)), 1).flatten(1)
            return self.linear(out)
    return Net()


def gn_silu(T, p=0.0):
    nn = T.nn

    def blk(cin, cout, stride):
        return [nn.Conv2d(cin, cout, 3, stride, 1), nn.GroupNorm(8, cout), nn.SiLU()]
    return nn.Sequential(*blk(3, 64, 1), *blk(64, 64, 1), *blk(64, 128, 2), *blk(128, 128, 1), *blk(128, 256, 2),
                         *blk(256, 256, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))


def autoenc(T, p=0.0):
    nn = T.nn
    return nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(64, 128, 4, 2, 1),
                         nn.BatchNorm2d(128), nn.LeakyReLU(0.2), nn.Conv2d(128, 256, 4, 2, 1), nn.BatchNorm2d(256),
                         nn.LeakyReLU(0.2),
                         nn.ConvTranspose2d(256, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
                         nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.ConvTranspose2d(64, 3, 4, 2, 1), nn.Sigmoid())


MODELS = {  # name: (builder, one sample's shape, batch, optimizer, loss)
    "mlp_ln": (mlp_ln, (1, 28, 28), 512, "adamw", "ce"),
    "mlp_bn": (mlp_bn, (1, 28, 28), 512, "adamw", "ce"),
    "vgg11": (vgg11, (3, 32, 32), 128, "sgd", "ce"),
    "mobilenetv2": (mobilenetv2, (3, 32, 32), 128, "sgd", "ce"),
    "resnext": (resnext, (3, 32, 32), 128, "sgd", "ce"),
    "densenet": (densenet, (3, 32, 32), 64, "sgd", "ce"),
    "gn_silu": (gn_silu, (3, 32, 32), 128, "adamw", "ce"),
    "autoenc": (autoenc, (3, 32, 32), 128, "adam", "mse"),
}


def make(T, name, dtype, strongest, p=0.1, seed=0, graph=False):
    """(model, step, batches) of ``name`` in framework ``T``; ``strongest``: PyTorch's eager settings (above) and
    fused optimizers (ours too: the same math), else plain optimizers. ``graph``: the whole step replayed from a
    CUDA graph (ours through ``capture_step``; PyTorch's captured as it documents, with capturable optimizers)."""
    build, shape, batch, optname, lossname = MODELS[name]
    T.manual_seed(seed)
    model = build(T, p).cuda()
    if T is not mf:
        T.backends.cudnn.benchmark = True
        T.backends.cudnn.allow_tf32 = T.backends.cuda.matmul.allow_tf32 = False
    channels_last = strongest and len(shape) == 3 and T is not mf
    if channels_last:
        model = model.to(memory_format=T.channels_last)
    kw = {"fused": True} if strongest else {}
    if graph and T is not mf:  # PyTorch's capturable forms: foreach SGD (no state to capture), fused Adam(W)
        kw = {"foreach": True} if optname == "sgd" else {"fused": True, "capturable": True}
    if optname == "sgd":
        opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, **kw)
    else:
        opt = getattr(T.optim, {"adamw": "AdamW", "adam": "Adam"}[optname])(model.parameters(), lr=1e-3, **kw)
    F = T.nn.functional

    def step(x, y):
        opt.zero_grad(set_to_none=not graph or T is mf)
        # (PyTorch's captures need autocast's cast cache off, as its CUDA graph notes say)
        with T.autocast("cuda", dtype=T.bfloat16, enabled=dtype == "bf16",
                        **({"cache_enabled": False} if graph and T is not mf else {})):
            out = model(x)
            loss = F.cross_entropy(out, y) if lossname == "ce" else F.mse_loss(out.float(), x.float())
        loss.backward()
        opt.step()
        return loss.detach()

    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(4):
        xs = rng.random((batch, *shape)) if lossname == "mse" else rng.standard_normal((batch, *shape))
        x = T.tensor(xs.astype(np.float32)).cuda()
        if channels_last:
            x = x.to(memory_format=T.channels_last)
        batches.append((x, T.tensor(rng.integers(0, 10, batch)).cuda()))
    if graph:
        step = mf.capture_step(step) if T is mf else torch_graphed(T, step, batches[0])
    return model, step, batches


def torch_graphed(torch, step, sample):
    """PyTorch's documented whole-step capture of ``step``: warm-up on a side stream, capture on static inputs,
    then each call copies its batch in and replays."""
    static = [t.clone() for t in sample]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step(*static)

    def replay(x, y):
        static[0].copy_(x)
        static[1].copy_(y)
        graph.replay()
        return loss
    return replay


def loss_difference(torch, name):
    """The largest relative difference of the two frameworks' fp32 losses over 3 steps from PyTorch's weights."""
    theirs, their_step, their_batches = make(torch, name, "fp32", False, p=0.0)
    mine, my_step, my_batches = make(mf, name, "fp32", False, p=0.0)
    mine.load_state_dict({k: mf.tensor(v.detach().cpu().numpy()).cuda() for k, v in theirs.state_dict().items()})
    their_losses = [float(their_step(*their_batches[i])) for i in range(3)]
    my_losses = [float(my_step(*my_batches[i])) for i in range(3)]
    return max(abs(a - b) / abs(a) for a, b in zip(their_losses, my_losses))


def events(T):
    if T is mf:
        return lambda: (cupy.cuda.Event(), cupy.cuda.Event())
    return lambda: (T.cuda.Event(enable_timing=True), T.cuda.Event(enable_timing=True))


def compare(res, torch, case, how, ratio, build, steps, rounds):
    """Both frameworks' ``how`` ("eager" or "graph") steps (``build(T)``: (step, batches)) timed in alternating
    ``rounds`` of ``steps`` steps: steps/s and peak-memory rows for ``case``, and the ratio ``ratio``, the median
    of the rounds' own."""
    mf.cuda.reset_peak_memory_stats()
    torch.cuda.reset_peak_memory_stats()
    mine, my_batches = build(mf)
    their, their_batches = build(torch)
    times = [(steps_per_s(mine, my_batches, steps, 1, mf.cuda.synchronize, events(mf)),
              steps_per_s(their, their_batches, steps, 1, torch.cuda.synchronize, events(torch)))
             for _ in range(rounds)]
    res.add(case, f"minifused {how}", statistics.median(a for a, _ in times), "steps/s")
    res.add(case, f"torch {how}", statistics.median(b for _, b in times), "steps/s")
    suffix = "" if how == "eager" else f" {how}"
    res.add(f"{case} peak memory{suffix}", "minifused", mf.cuda.max_memory_allocated() / 2**20, "MiB")
    res.add(f"{case} peak memory{suffix}", "torch", torch.cuda.max_memory_allocated() / 2**20, "MiB")
    res.ratio(ratio, statistics.median(a / b for a, b in times))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--modes", default="eager,graph", help="eager, graph (the whole step from a CUDA graph) or both")
    args = p.parse_args(argv)
    torch = torch_or_none()
    if torch is None:
        raise SystemExit("bench/zoo.py compares against PyTorch: it is not importable here")
    res = Results("zoo")
    for name in args.models.split(","):
        res.add(f"{name} fp32 loss after 3 steps", "relative difference", loss_difference(torch, name), "")
        for dtype, how in itertools.product(("fp32", "bf16"), args.modes.split(",")):
            compare(res, torch, f"{name} {dtype}", how, f"zoo_{name}_{dtype}_{how}_over_torch_{how}",
                    lambda T: make(T, name, dtype, True, graph=how == "graph")[1:], args.steps, args.rounds)
            gc.collect()  # (a graph's step keeps its pool until its cycles are collected)
            mf.cuda.empty_cache()
            torch.cuda.empty_cache()
        res.write()
    print("done")


if __name__ == "__main__":
    main()
