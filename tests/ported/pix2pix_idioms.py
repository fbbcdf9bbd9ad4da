"""Paired image-to-image translation (pix2pix) written as PyTorch users write it: a U-Net generator built from
nested skip-connection blocks (``torch.cat([x, self.model(x)], 1)``), the norm layer passed as a
``functools.partial`` (convolutions keep their bias only where an instance norm follows), a PatchGAN
discriminator on the input and output concatenated, a GAN loss whose real/fake labels are registered buffers
expanded to the prediction's shape, an L1 term, ``set_requires_grad`` to freeze the discriminator while the
generator steps, weights initialised through ``net.apply`` by class name, two Adams and a ``LambdaLR`` linear
decay. Pairs are synthetic: an edge-like map made with NumPy from the seed and the smooth image it outlines.
Only the imports name the framework.

    python pix2pix_idioms.py --steps 15

``main`` returns the generator's loss (GAN + lambda * L1) of every step."""
import argparse
import functools

import numpy as np

import torch
import torch.nn as nn
from torch.nn import init
from torch.optim import lr_scheduler


class UnetSkipConnectionBlock(nn.Module):
    """down -> submodule -> up, with the block's input concatenated to its output (except the outermost)."""

    def __init__(self, outer_nc, inner_nc, input_nc=None, submodule=None, outermost=False, innermost=False,
                 norm_layer=nn.BatchNorm2d, use_dropout=False):
        super().__init__()
        self.outermost = outermost
        if type(norm_layer) == functools.partial:
            use_bias = norm_layer.func == nn.InstanceNorm2d
        else:
            use_bias = norm_layer == nn.InstanceNorm2d
        if input_nc is None:
            input_nc = outer_nc
        downconv = nn.Conv2d(input_nc, inner_nc, kernel_size=4, stride=2, padding=1, bias=use_bias)
        downrelu = nn.LeakyReLU(0.2, True)
        downnorm = norm_layer(inner_nc)
        uprelu = nn.ReLU(True)
        upnorm = norm_layer(outer_nc)
        if outermost:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1)
            model = [downconv, submodule, uprelu, upconv, nn.Tanh()]
        elif innermost:
            upconv = nn.ConvTranspose2d(inner_nc, outer_nc, kernel_size=4, stride=2, padding=1, bias=use_bias)
            model = [downrelu, downconv, uprelu, upconv, upnorm]
        else:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1, bias=use_bias)
            model = [downrelu, downconv, downnorm, submodule, uprelu, upconv, upnorm]
            if use_dropout:
                model += [nn.Dropout(0.5)]
        self.model = nn.Sequential(*model)

    def forward(self, x):
        if self.outermost:
            return self.model(x)
        return torch.cat([x, self.model(x)], 1)


class UnetGenerator(nn.Module):
    def __init__(self, input_nc, output_nc, num_downs, ngf=8, norm_layer=nn.BatchNorm2d, use_dropout=False):
        super().__init__()
        block = UnetSkipConnectionBlock(ngf * 4, ngf * 4, innermost=True, norm_layer=norm_layer)
        for _ in range(num_downs - 4):
            block = UnetSkipConnectionBlock(ngf * 4, ngf * 4, submodule=block, norm_layer=norm_layer,
                                            use_dropout=use_dropout)
        block = UnetSkipConnectionBlock(ngf * 2, ngf * 4, submodule=block, norm_layer=norm_layer)
        block = UnetSkipConnectionBlock(ngf, ngf * 2, submodule=block, norm_layer=norm_layer)
        self.model = UnetSkipConnectionBlock(output_nc, ngf, input_nc=input_nc, submodule=block, outermost=True,
                                             norm_layer=norm_layer)

    def forward(self, input):
        return self.model(input)


class NLayerDiscriminator(nn.Module):
    """A PatchGAN: one logit per overlapping patch."""

    def __init__(self, input_nc, ndf=8, n_layers=2, norm_layer=nn.BatchNorm2d):
        super().__init__()
        use_bias = norm_layer.func == nn.InstanceNorm2d if type(norm_layer) == functools.partial \
            else norm_layer == nn.InstanceNorm2d
        sequence = [nn.Conv2d(input_nc, ndf, kernel_size=4, stride=2, padding=1), nn.LeakyReLU(0.2, True)]
        nf_mult = 1
        for n in range(1, n_layers):
            nf_mult_prev, nf_mult = nf_mult, min(2 ** n, 8)
            sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, kernel_size=4, stride=2, padding=1,
                                   bias=use_bias),
                         norm_layer(ndf * nf_mult), nn.LeakyReLU(0.2, True)]
        sequence += [nn.Conv2d(ndf * nf_mult, 1, kernel_size=3, stride=1, padding=1)]
        self.model = nn.Sequential(*sequence)

    def forward(self, input):
        return self.model(input)


class GANLoss(nn.Module):
    def __init__(self, gan_mode, target_real_label=1.0, target_fake_label=0.0):
        super().__init__()
        self.register_buffer("real_label", torch.tensor(target_real_label))
        self.register_buffer("fake_label", torch.tensor(target_fake_label))
        if gan_mode == "lsgan":
            self.loss = nn.MSELoss()
        elif gan_mode == "vanilla":
            self.loss = nn.BCEWithLogitsLoss()
        else:
            raise NotImplementedError(f"gan mode {gan_mode} not implemented")

    def __call__(self, prediction, target_is_real):
        target_tensor = self.real_label if target_is_real else self.fake_label
        return self.loss(prediction, target_tensor.expand_as(prediction))


def init_weights(net, init_gain=0.02):
    def init_func(m):
        classname = m.__class__.__name__
        if hasattr(m, "weight") and (classname.find("Conv") != -1 or classname.find("Linear") != -1):
            init.normal_(m.weight.data, 0.0, init_gain)
            if hasattr(m, "bias") and m.bias is not None:
                init.constant_(m.bias.data, 0.0)
        elif classname.find("BatchNorm2d") != -1:
            init.normal_(m.weight.data, 1.0, init_gain)
            init.constant_(m.bias.data, 0.0)

    net.apply(init_func)


def set_requires_grad(nets, requires_grad=False):
    if not isinstance(nets, list):
        nets = [nets]
    for net in nets:
        if net is not None:
            for param in net.parameters():
                param.requires_grad = requires_grad


def pairs(rng, count, size):
    """(A, B) in [-1, 1]: B smooth colour blobs, A their outline (the gradient magnitude of B's luminance)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    centre = rng.uniform(3, size - 3, (2, count, 2, 1, 1)).astype(np.float32)
    width = rng.uniform(2.0, 4.0, (count, 2, 1, 1)).astype(np.float32)
    blobs = np.exp(-((yy - centre[0]) ** 2 + (xx - centre[1]) ** 2) / (2 * width ** 2))  # (count, 2, size, size)
    colour = rng.uniform(0.2, 1.0, (count, 2, 3)).astype(np.float32)
    b = np.einsum("nkhw,nkc->nchw", blobs, colour).clip(0, 1)
    lum = b.mean(1, keepdims=True)
    gy, gx = np.gradient(lum, axis=(2, 3))
    a = np.sqrt(gy ** 2 + gx ** 2)
    a = a / a.max(axis=(2, 3), keepdims=True)
    return (2 * a - 1).astype(np.float32), (2 * b - 1).astype(np.float32)


def parse_args(argv):
    p = argparse.ArgumentParser(description="pix2pix on synthetic outline -> image pairs")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--train-size", type=int, default=16, help="pairs, taken in order")
    p.add_argument("--norm", default="batch", choices=["batch", "instance"])
    p.add_argument("--gan-mode", default="vanilla", choices=["vanilla", "lsgan"])
    p.add_argument("--lambda-L1", type=float, default=100.0)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--no-dropout", action="store_true", help="no dropout in the generator (deterministic steps)")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)
    if args.norm == "batch":
        norm_layer = functools.partial(nn.BatchNorm2d, affine=True, track_running_stats=True)
    else:
        norm_layer = functools.partial(nn.InstanceNorm2d, affine=False, track_running_stats=False)

    netG = UnetGenerator(1, 3, 4, norm_layer=norm_layer, use_dropout=not args.no_dropout).to(device)
    netD = NLayerDiscriminator(1 + 3, norm_layer=norm_layer).to(device)
    init_weights(netG)
    init_weights(netD)
    if init is not None:  # one stage: both networks train in every step
        init("gan", {f"{name}.{k}": p for name, net in (("netG", netG), ("netD", netD))
                     for k, p in net.named_parameters()})
    criterionGAN = GANLoss(args.gan_mode).to(device)
    criterionL1 = torch.nn.L1Loss()
    optimizer_G = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
    n_epochs, n_epochs_decay = args.steps // 2, args.steps - args.steps // 2

    def lambda_rule(epoch):
        return 1.0 - max(0, epoch - n_epochs) / float(n_epochs_decay + 1)

    schedulers = [lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda_rule) for optimizer in (optimizer_G, optimizer_D)]

    data_A, data_B = pairs(rng, args.train_size, 16)
    losses = []
    for step in range(args.steps):
        start = step * args.batch_size % args.train_size
        real_A = torch.from_numpy(data_A[start:start + args.batch_size]).to(device)
        real_B = torch.from_numpy(data_B[start:start + args.batch_size]).to(device)
        fake_B = netG(real_A)

        # D: real pairs as real, generated pairs as fake (the generator's graph cut by detach)
        set_requires_grad(netD, True)
        optimizer_D.zero_grad()
        fake_AB = torch.cat((real_A, fake_B), 1)
        loss_D_fake = criterionGAN(netD(fake_AB.detach()), False)
        real_AB = torch.cat((real_A, real_B), 1)
        loss_D_real = criterionGAN(netD(real_AB), True)
        loss_D = (loss_D_fake + loss_D_real) * 0.5
        loss_D.backward()
        optimizer_D.step()

        # G: fool D and stay close to B
        set_requires_grad(netD, False)
        optimizer_G.zero_grad()
        loss_G_GAN = criterionGAN(netD(fake_AB), True)
        loss_G_L1 = criterionL1(fake_B, real_B) * args.lambda_L1
        loss_G = loss_G_GAN + loss_G_L1
        loss_G.backward()
        optimizer_G.step()

        for scheduler in schedulers:
            scheduler.step()
        losses.append(loss_G.item())
        print(f"step {step}: G_GAN {loss_G_GAN.item():.4f} G_L1 {loss_G_L1.item():.4f} D_real "
              f"{loss_D_real.item():.4f} D_fake {loss_D_fake.item():.4f} lr {optimizer_G.param_groups[0]['lr']:.7f}")

    netG.eval()
    with torch.no_grad():
        fake = netG(torch.from_numpy(data_A[:2]).to(device))
    image = ((fake[0].cpu().float().numpy().transpose(1, 2, 0) + 1) / 2.0 * 255.0).astype(np.uint8)
    print(f"translated image {image.shape}, values {image.min()}..{image.max()}")
    return losses


if __name__ == "__main__":
    main()
