"""Single-image super-resolution with a sub-pixel convolution network, written as PyTorch users write it: four
convolutions whose last one makes r*r channels that ``nn.PixelShuffle(r)`` turns into an r-times larger image,
weights set by ``init.orthogonal_`` with ``init.calculate_gain('relu')``, training on the luma channel of a
YCbCr split (``split`` along the channels, chroma upsampled by ``F.interpolate``), ``MSELoss``, Adam, and PSNR
as ``10 * log10(1 / mse.item())``. The images are smooth random colour patterns made with NumPy from the seed,
downscaled by block averages, so every framework sees the same batches. Only the imports name the framework.

    python super_resolution_idioms.py --steps 20

``main`` returns the training loss (the luma MSE) of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim


class Net(nn.Module):
    def __init__(self, upscale_factor, width=16):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, width, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(width, width, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(width, width // 2, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(width // 2, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def rgb_to_ycbcr(img):
    """(N, 3, H, W) RGB in [0, 1] -> (N, 3, H, W) YCbCr in [0, 1] (JPEG's full-range matrix)."""
    r, g, b = img.split(1, dim=1)
    y = 0.299 * r + 0.587 * g + 0.114 * b
    cb = 0.5 + (b - y) * 0.564
    cr = 0.5 + (r - y) * 0.713
    return torch.cat([y, cb, cr], dim=1)


def ycbcr_to_rgb(img):
    y, cb, cr = img[:, 0], img[:, 1] - 0.5, img[:, 2] - 0.5
    r = y + 1.403 * cr
    g = y - 0.714 * cr - 0.344 * cb
    b = y + 1.773 * cb
    return torch.stack((r, g, b), 1).clamp(0, 1)


def images(rng, count, size):
    """Smooth random colour patterns in [0, 1]: a few sinusoids per channel."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    freq = rng.uniform(0.5, 3, (count, 3, 2, 1, 1)).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, (count, 3, 1, 1)).astype(np.float32)
    wave = np.sin(2 * np.pi * (freq[:, :, 0] * yy + freq[:, :, 1] * xx) + phase)
    return (0.5 + 0.4 * wave).astype(np.float32)


def low_res(batch, factor):
    """Block averages: the image made ``factor`` times smaller."""
    n, c, h, w = batch.shape
    return batch.reshape(n, c, h // factor, factor, w // factor, factor).mean(axis=(3, 5))


def parse_args(argv):
    p = argparse.ArgumentParser(description="sub-pixel convolution super-resolution on synthetic images")
    p.add_argument("--upscale-factor", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--train-size", type=int, default=32, help="training images, taken in order")
    p.add_argument("--image-size", type=int, default=16, help="the high-resolution side")
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=123)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)
    r = args.upscale_factor

    high = images(rng, args.train_size, args.image_size)
    train_high = rgb_to_ycbcr(torch.from_numpy(high))
    train_low = rgb_to_ycbcr(torch.from_numpy(low_res(high, r)))

    model = Net(upscale_factor=r).to(device)
    if init is not None:
        init("net", dict(model.named_parameters()))
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    losses = []
    model.train()
    for step in range(args.steps):
        start = step * args.batch_size % args.train_size
        input = train_low[start:start + args.batch_size, :1].to(device)  # the luma channel only
        target = train_high[start:start + args.batch_size, :1].to(device)
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        print(f"step {step}: loss {loss.item():.6f}")

    model.eval()
    avg_psnr = 0.0
    with torch.no_grad():
        for start in range(0, args.train_size, args.batch_size):
            input = train_low[start:start + args.batch_size, :1].to(device)
            target = train_high[start:start + args.batch_size, :1].to(device)
            mse = criterion(model(input), target)
            avg_psnr += 10 * math.log10(1 / mse.item())
        # a super-resolved colour image: the network's luma, the chroma upsampled
        low = train_low[:1].to(device)
        y = model(low[:, :1])
        cb_cr = F.interpolate(low[:, 1:], scale_factor=r, mode="bicubic", align_corners=False)
        out = ycbcr_to_rgb(torch.cat([y, cb_cr], dim=1))
    print(f"Avg. PSNR: {avg_psnr / math.ceil(args.train_size / args.batch_size):.4f} dB; "
          f"output {tuple(out.shape)} in [{out.min().item():.3f}, {out.max().item():.3f}]")
    return losses


if __name__ == "__main__":
    main()
