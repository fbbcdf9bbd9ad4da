"""Fast neural style transfer written as PyTorch users write it: a transformer network of reflection-padded
convolutions (bias-free where an instance norm follows) with affine instance norm, residual blocks and
nearest-neighbour upsampling (``F.interpolate`` and ``nn.Upsample``); a frozen feature network
(``requires_grad_(False)``, ``.eval()``) of convolutions and max-pooling whose activations give the content loss
and, through Gram matrices (``bmm`` with ``transpose(1, 2)``, divided by c*h*w), the style loss; images in
[0, 255] normalized in place with mean/std tensors viewed as (-1, 1, 1); ``clamp(0, 255)`` on the stylized
output; Adam. The content and style images are smooth random patterns made with NumPy from the seed, so every
framework sees the same batches. Only the imports name the framework.

    python style_transfer_idioms.py --steps 15

``main`` returns the total (content + style) loss of every step."""
import argparse
from collections import namedtuple

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam


class ConvLayer(nn.Module):
    """A reflection-padded convolution; one that an instance norm follows needs no bias (the norm removes it)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, bias=True):
        super().__init__()
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride, bias=bias)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1, bias=False)
        self.in1 = nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1, bias=False)
        self.in2 = nn.InstanceNorm2d(channels, affine=True)
        self.relu = nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        return out + residual


class UpsampleConvLayer(nn.Module):
    """Upsample by ``F.interpolate`` then convolve: no checkerboard artefacts of a transposed convolution."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None, bias=True):
        super().__init__()
        self.upsample = upsample
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride, bias=bias)

    def forward(self, x):
        if self.upsample:
            x = F.interpolate(x, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.reflection_pad(x))


class TransformerNet(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv1 = ConvLayer(3, width, kernel_size=5, stride=1, bias=False)
        self.in1 = nn.InstanceNorm2d(width, affine=True)
        self.conv2 = ConvLayer(width, 2 * width, kernel_size=3, stride=2, bias=False)
        self.in2 = nn.InstanceNorm2d(2 * width, affine=True)
        self.res1 = ResidualBlock(2 * width)
        self.res2 = ResidualBlock(2 * width)
        self.deconv1 = UpsampleConvLayer(2 * width, width, kernel_size=3, stride=1, upsample=2, bias=False)
        self.in3 = nn.InstanceNorm2d(width, affine=True)
        self.deconv2 = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                                     ConvLayer(width, width, 3, 1, bias=False))
        self.in4 = nn.InstanceNorm2d(width, affine=True)
        self.conv3 = ConvLayer(width, 3, kernel_size=5, stride=2)
        self.relu = nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.res2(self.res1(y))
        y = self.relu(self.in3(self.deconv1(y)))
        y = self.relu(self.in4(self.deconv2(y)))
        return 127.5 * (torch.tanh(self.conv3(y)) + 1)  # in the images' range, [0, 255]


class Features(nn.Module):
    """A small VGG-like feature extractor that returns the activations of its stages."""

    def __init__(self, requires_grad=False):
        super().__init__()
        self.slice1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.slice2 = nn.Sequential(nn.MaxPool2d(kernel_size=2, stride=2), nn.Conv2d(8, 16, 3, padding=1),
                                    nn.ReLU(inplace=True))
        self.slice3 = nn.Sequential(nn.MaxPool2d(kernel_size=2, stride=2), nn.Conv2d(16, 16, 3, padding=1),
                                    nn.ReLU(inplace=True))
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h1 = self.slice1(X)
        h2 = self.slice2(h1)
        h3 = self.slice3(h2)
        outputs = namedtuple("Outputs", ["relu1", "relu2", "relu3"])
        return outputs(h1, h2, h3)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    return features.bmm(features_t) / (ch * h * w)


def normalize_batch(batch):
    # normalize as the feature network expects: images in [0, 255] to ImageNet statistics
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def images(rng, count, size):
    """Smooth random colour patterns in [0, 255]: a few sinusoids per channel."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    freq = rng.uniform(1, 4, (count, 3, 2, 1, 1)).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, (count, 3, 1, 1)).astype(np.float32)
    wave = np.sin(2 * np.pi * (freq[:, :, 0] * yy + freq[:, :, 1] * xx) + phase)
    return (127.5 * (1 + wave)).astype(np.float32)


def parse_args(argv):
    p = argparse.ArgumentParser(description="fast neural style transfer on synthetic patterns")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--train-size", type=int, default=16, help="content images, taken in order")
    p.add_argument("--image-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--content-weight", type=float, default=1.0)
    p.add_argument("--style-weight", type=float, default=10.0)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)

    transformer = TransformerNet().to(device)
    features = Features(requires_grad=False).to(device).eval()
    features.requires_grad_(False)
    if init is not None:  # one stage: the transformer trains, the feature network is frozen
        init("nets", {f"{name}.{k}": p for name, net in (("transformer", transformer), ("features", features))
                      for k, p in net.named_parameters()})
    optimizer = Adam(transformer.parameters(), args.lr)
    mse_loss = torch.nn.MSELoss()

    style = torch.from_numpy(images(rng, 1, args.image_size)).to(device)
    style = style.repeat(args.batch_size, 1, 1, 1)
    features_style = features(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    train_images = torch.from_numpy(images(rng, args.train_size, args.image_size))
    losses = []
    transformer.train()
    for step in range(args.steps):
        start = step * args.batch_size % args.train_size
        x = train_images[start:start + args.batch_size].clone().to(device)  # (normalize_batch divides in place)
        n_batch = len(x)
        optimizer.zero_grad()

        y = transformer(x)
        y = normalize_batch(y)
        x = normalize_batch(x)
        features_y = features(y)
        features_x = features(x)

        content_loss = args.content_weight * mse_loss(features_y.relu2, features_x.relu2)
        style_loss = 0.0
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
        style_loss *= args.style_weight

        total_loss = content_loss + style_loss
        total_loss.backward()
        optimizer.step()
        losses.append(total_loss.item())
        print(f"step {step}: content {content_loss.item():.4f} style {style_loss.item():.4f} "
              f"total {total_loss.item():.4f}")

    transformer.eval()
    with torch.no_grad():
        content = torch.from_numpy(images(rng, 1, args.image_size)).to(device)
        output = transformer(content).cpu()
    img = output[0].clone().clamp(0, 255).numpy()
    img = img.transpose(1, 2, 0).astype("uint8")
    print(f"stylized image {img.shape}, values {img.min()}..{img.max()}")
    return losses


if __name__ == "__main__":
    main()
