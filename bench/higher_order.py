"""Training steps whose loss holds a gradient (``create_graph=True``), minifused against PyTorch eager at its
strongest, written once for either framework:

* ``wgan_gp``: a WGAN-GP critic step (DCGAN-style critic: three 4x4 stride-2 convolutions with LeakyReLU and a
  linear head, 3x32x32 inputs, batch 64): the gradient penalty ((|d critic / d x_hat| - 1)^2) backpropagated into
  the weights, Adam;
* ``pinn``: a physics-informed MLP (2 -> 64 -> 64 -> 64 -> 1, tanh) on 4096 collocation points: Burgers'
  residual u_t + u u_x - nu u_xx, whose second derivative is in the loss, Adam.

fp32 (strict: TF32 off in both). PyTorch gets ``cudnn.benchmark``, channels_last for the critic and fused Adam
(ours is fused too). Steps/s are timed with CUDA events over ``--steps`` steps after a warm-up, the two
frameworks in alternating rounds; each ratio ``higher_<case>_eager_over_torch_eager`` (> 1: minifused is faster)
is the median of the rounds' ratios. The ``loss after 3 steps`` rows check the same math: both frameworks from the
same weights and batches, their losses' largest relative difference.

    python bench/higher_order.py [--steps 20] [--rounds 5]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

import minifused as mf  # noqa: E402
from harness import Results, torch_or_none  # noqa: E402
from zoo import compare  # noqa: E402


def critic(T):
    nn = T.nn
    return nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(64, 128, 4, 2, 1), nn.LeakyReLU(0.2),
                         nn.Conv2d(128, 256, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(256 * 4 * 4, 1))


def pinn(T):
    nn = T.nn
    return nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 1))


def make(T, name, strongest, seed=0):
    """(model, step, batches) of ``name`` in framework ``T``; ``strongest``: PyTorch's eager settings."""
    T.manual_seed(seed)
    model = (critic if name == "wgan_gp" else pinn)(T).cuda()
    if T is not mf:
        T.backends.cudnn.benchmark = True
        T.backends.cudnn.allow_tf32 = T.backends.cuda.matmul.allow_tf32 = False
    channels_last = strongest and name == "wgan_gp" and T is not mf
    if channels_last:
        model = model.to(memory_format=T.channels_last)
    opt = T.optim.Adam(model.parameters(), lr=1e-4, betas=(0.5, 0.9), **({"fused": True} if strongest else {}))
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(4):
        if name == "wgan_gp":
            real, fake = (T.tensor(rng.standard_normal((64, 3, 32, 32)).astype(np.float32)).cuda() for _ in "rf")
            alpha = T.tensor(rng.random((64, 1, 1, 1)).astype(np.float32)).cuda()
            if channels_last:
                real, fake = real.to(memory_format=T.channels_last), fake.to(memory_format=T.channels_last)
            batches.append((real, fake, alpha))
        else:
            batches.append((T.tensor(rng.uniform(-1, 1, (4096, 2)).astype(np.float32)).cuda(),))

    def wgan_step(real, fake, alpha):
        opt.zero_grad(set_to_none=True)
        x_hat = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        score = model(x_hat)
        (g,) = T.autograd.grad(score, x_hat, grad_outputs=T.ones_like(score), create_graph=True)
        gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
        loss = model(fake).mean() - model(real).mean() + 10 * gp
        loss.backward()
        opt.step()
        return loss.detach()

    def pinn_step(points):
        opt.zero_grad(set_to_none=True)
        xt = points.requires_grad_(True)
        u = model(xt)
        (du,) = T.autograd.grad(u.sum(), xt, create_graph=True)
        u_x, u_t = du[:, 0:1], du[:, 1:2]
        (du_x,) = T.autograd.grad(u_x.sum(), xt, create_graph=True)
        loss = ((u_t + u * u_x - 0.01 / np.pi * du_x[:, 0:1]) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    return model, wgan_step if name == "wgan_gp" else pinn_step, batches


def loss_difference(torch, name):
    """The largest relative difference of the two frameworks' losses over 3 steps from PyTorch's weights."""
    theirs, their_step, their_batches = make(torch, name, False)
    mine, my_step, my_batches = make(mf, name, False)
    mine.load_state_dict({k: mf.tensor(v.detach().cpu().numpy()).cuda() for k, v in theirs.state_dict().items()})
    their_losses = [float(their_step(*their_batches[i])) for i in range(3)]
    my_losses = [float(my_step(*my_batches[i])) for i in range(3)]
    return max(abs(a - b) / abs(a) for a, b in zip(their_losses, my_losses))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    torch = torch_or_none()
    if torch is None:
        raise SystemExit("bench/higher_order.py compares against PyTorch: it is not importable here")
    res = Results("higher_order")
    for name in ("wgan_gp", "pinn"):
        res.add(f"{name} fp32 loss after 3 steps", "relative difference", loss_difference(torch, name), "")
        compare(res, torch, f"{name} fp32", "eager", f"higher_{name}_eager_over_torch_eager",
                lambda T: make(T, name, True)[1:], args.steps, args.rounds)
        res.write()
    print("done")


if __name__ == "__main__":
    main()
