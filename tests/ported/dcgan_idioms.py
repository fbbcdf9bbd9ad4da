"""A deep convolutional GAN written as PyTorch users write one: a generator of transposed convolutions with
batch norm, ReLU and a Tanh output, a discriminator of strided convolutions with in-place LeakyReLU(0.2), batch
norm and a Sigmoid output, ``weights_init`` applied through ``model.apply`` (switching on the class name),
``BCELoss`` against label tensors made with ``torch.full`` and refilled in place, ``fake.detach()`` for the
discriminator's step and two Adam optimizers with ``betas=(0.5, 0.999)``. The "real" images are smooth
random blobs made with NumPy from the seed, and so is the noise, so every framework sees the same batches.
Only the imports name the framework.

    python dcgan_idioms.py --steps 20

``main`` returns the discriminator's loss of every step (errD_real + errD_fake)."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.optim as optim

REAL_LABEL = 1.0
FAKE_LABEL = 0.0


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.constant_(m.bias, 0)


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc):
        super().__init__()
        self.main = nn.Sequential(
            # nz x 1 x 1 -> (ngf*2) x 4 x 4
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # -> ngf x 8 x 8
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            # -> nc x 16 x 16
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, nc, ndf):
        super().__init__()
        self.main = nn.Sequential(
            # nc x 16 x 16 -> ndf x 8 x 8
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # -> (ndf*2) x 4 x 4
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # -> 1 x 1 x 1
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input)


def real_images(rng, count, nc, size):
    """Gaussian blobs at random places on a dark background, scaled to [-1, 1] as Tanh's range."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    cy, cx = rng.uniform(4, size - 4, (2, count, 1, 1, 1)).astype(np.float32)
    width = rng.uniform(1.5, 3.0, (count, 1, 1, 1)).astype(np.float32)
    tint = rng.uniform(0.5, 1.0, (count, nc, 1, 1)).astype(np.float32)
    blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * width ** 2))
    return (2 * tint * blob - 1).astype(np.float32)


def parse_args(argv):
    p = argparse.ArgumentParser(description="a small DCGAN on synthetic blobs")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--nz", type=int, default=8, help="size of the latent vector")
    p.add_argument("--ngf", type=int, default=8)
    p.add_argument("--ndf", type=int, default=8)
    p.add_argument("--nc", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.0002)
    p.add_argument("--beta1", type=float, default=0.5)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)

    netG = Generator(args.nz, args.ngf, args.nc).to(device)
    netG.apply(weights_init)
    netD = Discriminator(args.nc, args.ndf).to(device)
    netD.apply(weights_init)
    if init is not None:  # one stage: both networks train in every step
        init("gan", {f"{name}.{k}": p for name, net in (("netG", netG), ("netD", netD))
                     for k, p in net.named_parameters()})

    criterion = nn.BCELoss()
    fixed_noise = torch.from_numpy(rng.standard_normal((4, args.nz, 1, 1)).astype(np.float32)).to(device)
    optimizerD = optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

    losses = []
    for i in range(args.steps):
        # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real_cpu = torch.from_numpy(real_images(rng, args.batch_size, args.nc, 16))
        real = real_cpu.to(device)
        b_size = real.size(0)
        label = torch.full((b_size,), REAL_LABEL, dtype=torch.float, device=device)
        output = netD(real).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.from_numpy(rng.standard_normal((b_size, args.nz, 1, 1)).astype(np.float32)).to(device)
        fake = netG(noise)
        label.fill_(FAKE_LABEL)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        # (2) update G: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(REAL_LABEL)  # fake labels are real for the generator's cost
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        losses.append(errD.item())
        print(f"[{i}/{args.steps}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
              f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}")

    with torch.no_grad():
        samples = netG(fixed_noise).detach().cpu()
    print(f"samples in [{samples.min().item():.3f}, {samples.max().item():.3f}]")
    return losses


if __name__ == "__main__":
    main()
