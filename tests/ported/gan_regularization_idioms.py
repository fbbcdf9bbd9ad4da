"""GAN regularization as PyTorch users write it. A critic without batch norm (``InstanceNorm2d(affine=True)``,
``LayerNorm`` or none, in-place ``LeakyReLU(0.2)``) against a generator whose first layer is weight-normalized
(``torch.nn.utils.parametrizations.weight_norm``), trained by one of:

- WGAN-GP: ``n_critic`` critic steps per generator step on ``D(fake) - D(real)`` plus the gradient penalty, the
  critic's gradient at images interpolated between real and fake (the mixing weights drawn with NumPy) taken by
  ``torch.autograd.grad(outputs=..., inputs=..., grad_outputs=torch.ones_like(...), create_graph=True,
  retain_graph=True)`` and pushed to unit norm (``.view(b, -1).norm(2, dim=1)``);
- the hinge loss (``F.relu(1 - d_real).mean() + F.relu(1 + d_fake).mean()``) with the R1 penalty on the real
  images (``real.requires_grad_(True)``, ``grad.pow(2).reshape(b, -1).sum(1).mean()``) and the critic's
  convolutions and linear layer under ``torch.nn.utils.parametrizations.spectral_norm`` (its power iteration's
  starting vectors set from NumPy through the parametrization's buffers, so every framework begins from the same).

The critic is frozen around the generator's step (``p.requires_grad_(False)`` for each parameter under WGAN-GP,
``D.requires_grad_(False)`` on the module under the hinge loss); both Adams take ``betas=(0.0, 0.9)`` and
``zero_grad(set_to_none=True)``; an EMA of the generator (``copy.deepcopy``, then ``lerp_`` under
``torch.no_grad()``, its buffers copied) makes the samples printed at the end. The "real" images are smooth
random blobs made with NumPy from the seed, and so is the noise. Only the imports name the framework.

    python gan_regularization_idioms.py --steps 20
    python gan_regularization_idioms.py --loss hinge --norm layer --spectral-norm --steps 20

``main`` returns the critic's loss of every generator step (its last critic step's)."""
import argparse
import copy

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import spectral_norm, weight_norm


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc):
        super().__init__()
        self.ngf = ngf
        self.fc = weight_norm(nn.Linear(nz, 2 * ngf * 4 * 4))
        self.net = nn.Sequential(
            nn.BatchNorm2d(2 * ngf),
            nn.ReLU(True),
            # (2*ngf) x 4 x 4 -> ngf x 8 x 8
            nn.Upsample(scale_factor=2, mode="nearest"),
            nn.Conv2d(2 * ngf, ngf, 3, 1, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            # -> nc x 16 x 16
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.net(self.fc(z).view(-1, 2 * self.ngf, 4, 4))


class Critic(nn.Module):
    """No batch norm: the gradient penalties are taken per sample, which a batch statistic would couple."""

    def __init__(self, nc, ndf, norm="instance", sn=False):
        super().__init__()
        wrap = spectral_norm if sn else (lambda m: m)
        if norm == "instance":
            norm_layer = nn.InstanceNorm2d(2 * ndf, affine=True)
        elif norm == "layer":
            norm_layer = nn.LayerNorm([2 * ndf, 4, 4])
        else:
            norm_layer = nn.Identity()
        self.main = nn.Sequential(
            # nc x 16 x 16 -> ndf x 8 x 8
            wrap(nn.Conv2d(nc, ndf, 4, 2, 1)),
            nn.LeakyReLU(0.2, inplace=True),
            # -> (2*ndf) x 4 x 4
            wrap(nn.Conv2d(ndf, 2 * ndf, 4, 2, 1)),
            norm_layer,
            nn.LeakyReLU(0.2, inplace=True),
            nn.Flatten(),
            wrap(nn.Linear(2 * ndf * 4 * 4, 1)),
        )

    def forward(self, x):
        return self.main(x).view(-1)


def seed_power_iteration(model, rng):
    """Each spectral norm's ``_u`` and ``_v`` (random unit vectors drawn by the framework's own generator when it
    was registered) redrawn from NumPy."""
    for module in model.modules():
        if parametrize.is_parametrized(module, "weight"):
            sn = module.parametrizations.weight[0]
            if hasattr(sn, "_u"):
                with torch.no_grad():
                    for buf in (sn._u, sn._v):
                        vec = rng.standard_normal(buf.shape)
                        buf.copy_(torch.from_numpy((vec / np.linalg.norm(vec)).astype(np.float32)))


def real_images(rng, count, nc, size):
    """Gaussian blobs at random places on a dark background, scaled to [-1, 1] as Tanh's range."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    cy, cx = rng.uniform(4, size - 4, (2, count, 1, 1, 1)).astype(np.float32)
    width = rng.uniform(1.5, 3.0, (count, 1, 1, 1)).astype(np.float32)
    tint = rng.uniform(0.5, 1.0, (count, nc, 1, 1)).astype(np.float32)
    blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * width ** 2))
    return (2 * tint * blob - 1).astype(np.float32)


def gradient_penalty(D, real, fake, rng):
    """WGAN-GP's penalty: the critic's gradient norm at random points between real and fake, pushed to 1."""
    b = real.size(0)
    alpha = torch.from_numpy(rng.uniform(size=(b, 1, 1, 1)).astype(np.float32)).to(real.device)
    interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    d_interp = D(interp)
    grad = torch.autograd.grad(outputs=d_interp, inputs=interp, grad_outputs=torch.ones_like(d_interp),
                               create_graph=True, retain_graph=True)[0]
    return ((grad.view(b, -1).norm(2, dim=1) - 1) ** 2).mean()


def r1_penalty(d_real, real):
    """R1: the squared norm of the critic's gradient on the real images (which must require grad)."""
    (grad,) = torch.autograd.grad(outputs=d_real.sum(), inputs=real, create_graph=True)
    return grad.pow(2).reshape(real.size(0), -1).sum(1).mean()


def parse_args(argv):
    p = argparse.ArgumentParser(description="a small regularized GAN on synthetic blobs")
    p.add_argument("--steps", type=int, default=20, help="generator steps")
    p.add_argument("--loss", choices=("wgan-gp", "hinge"), default="wgan-gp")
    p.add_argument("--norm", choices=("instance", "layer", "none"), default="instance")
    p.add_argument("--spectral-norm", action="store_true")
    p.add_argument("--n-critic", type=int, default=None, help="critic steps per generator step (wgan-gp: 2)")
    p.add_argument("--gp-weight", type=float, default=10.0)
    p.add_argument("--r1-gamma", type=float, default=1.0)
    p.add_argument("--ema", type=float, default=0.9)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--nz", type=int, default=8)
    p.add_argument("--ngf", type=int, default=8)
    p.add_argument("--ndf", type=int, default=8)
    p.add_argument("--nc", type=int, default=1)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)
    n_critic = args.n_critic or (2 if args.loss == "wgan-gp" else 1)

    G = Generator(args.nz, args.ngf, args.nc).to(device)
    D = Critic(args.nc, args.ndf, args.norm, args.spectral_norm).to(device)
    if init is not None:  # one stage: both networks train in every step
        init("gan", {f"{name}.{k}": p for name, net in (("G", G), ("D", D)) for k, p in net.named_parameters()})
    seed_power_iteration(D, rng)
    G_ema = copy.deepcopy(G).eval()

    optD = torch.optim.Adam(D.parameters(), lr=args.lr, betas=(0.0, 0.9))
    optG = torch.optim.Adam(G.parameters(), lr=args.lr, betas=(0.0, 0.9))
    fixed_noise = torch.from_numpy(rng.standard_normal((4, args.nz)).astype(np.float32)).to(device)
    b = args.batch_size

    losses = []
    for step in range(args.steps):
        # (1) the critic
        if args.loss == "wgan-gp":
            for p in D.parameters():
                p.requires_grad_(True)
        else:
            D.requires_grad_(True)
        for _ in range(n_critic):
            real = torch.from_numpy(real_images(rng, b, args.nc, 16)).to(device)
            z = torch.from_numpy(rng.standard_normal((b, args.nz)).astype(np.float32)).to(device)
            with torch.no_grad():
                fake = G(z)
            optD.zero_grad(set_to_none=True)
            if args.loss == "wgan-gp":
                d_real, d_fake = D(real), D(fake)
                gp = gradient_penalty(D, real, fake, rng)
                d_loss = d_fake.mean() - d_real.mean() + args.gp_weight * gp
            else:
                real.requires_grad_(True)
                d_real, d_fake = D(real), D(fake)
                d_loss = F.relu(1.0 - d_real).mean() + F.relu(1.0 + d_fake).mean()
                if args.r1_gamma > 0:
                    d_loss = d_loss + args.r1_gamma / 2 * r1_penalty(d_real, real)
            d_loss.backward()
            optD.step()

        # (2) the generator, the critic frozen
        if args.loss == "wgan-gp":
            for p in D.parameters():
                p.requires_grad_(False)
        else:
            D.requires_grad_(False)
        z = torch.from_numpy(rng.standard_normal((b, args.nz)).astype(np.float32)).to(device)
        optG.zero_grad(set_to_none=True)
        g_loss = -D(G(z)).mean()
        g_loss.backward()
        optG.step()
        with torch.no_grad():
            for p_ema, p in zip(G_ema.parameters(), G.parameters()):
                p_ema.lerp_(p, 1.0 - args.ema)
            for b_ema, b_ in zip(G_ema.buffers(), G.buffers()):
                b_ema.copy_(b_)

        losses.append(d_loss.item())
        print(f"[{step}/{args.steps}] Loss_D: {d_loss.item():.4f} Loss_G: {g_loss.item():.4f}")

    with torch.no_grad():
        samples = G_ema(fixed_noise).cpu()
    print(f"EMA samples in [{samples.min().item():.3f}, {samples.max().item():.3f}]")
    return losses


if __name__ == "__main__":
    main()
