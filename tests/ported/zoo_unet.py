"""A U-Net for segmentation in the shape people copy it: double 3x3 conv blocks, max-pool down, up by a
``ConvTranspose2d(k=2, s=2)`` (or a bilinear ``nn.Upsample``), the skip joined by ``torch.cat([skip, up], dim=1)``
after odd sizes are fixed (``F.interpolate(..., mode='bilinear', align_corners=True)`` or ``F.pad``), a 1x1 head.
Trained on binary masks with ``BCEWithLogitsLoss`` plus a soft Dice loss written by hand, or on several classes
with cross-entropy plus a Dice over one-hot targets; AdamW with ``ReduceLROnPlateau`` on the validation Dice (or
nesterov SGD with a polynomial ``LambdaLR``), ``clip_grad_norm_``, and Dice / IoU measured under ``model.eval()``.
Synthetic shapes, no downloads. Only the imports name the framework.

    python zoo_unet.py --steps 10 --classes 1

``main`` returns the training loss of every step."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


class DoubleConv(nn.Module):
    """(conv => BN => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, bilinear=False):
        super().__init__()
        self.bilinear = bilinear
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        if self.bilinear:
            # input is CHW: pad the upsampled map to the skip's size
            diff_y = x2.size()[2] - x1.size()[2]
            diff_x = x2.size()[3] - x1.size()[3]
            x1 = F.pad(x1, [diff_x // 2, diff_x - diff_x // 2, diff_y // 2, diff_y - diff_y // 2])
        elif x1.shape[-2:] != x2.shape[-2:]:
            x1 = F.interpolate(x1, size=x2.shape[2:], mode="bilinear", align_corners=True)
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=1, bilinear=False, base=8):
        super().__init__()
        self.n_channels, self.n_classes, self.bilinear = n_channels, n_classes, bilinear
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        self.down2 = Down(base * 2, base * 4)
        self.down3 = Down(base * 4, base * 8 // factor)
        self.up1 = Up(base * 8, base * 4 // factor, bilinear)
        self.up2 = Up(base * 4, base * 2 // factor, bilinear)
        self.up3 = Up(base * 2, base, bilinear)
        self.outc = nn.Conv2d(base, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x = self.up1(x4, x3)
        x = self.up2(x, x2)
        x = self.up3(x, x1)
        return self.outc(x)


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    """The mean Dice coefficient of the (N, H, W) or (H, W) maps ``input`` and ``target``."""
    assert input.size() == target.size()
    assert input.dim() == 3 or not reduce_batch_first
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input, target, multiclass=False):
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


class SoftDiceLoss(nn.Module):
    """1 - Dice of the sigmoid probabilities, per image and channel, with additive smoothing."""

    def __init__(self, smooth=1.0):
        super().__init__()
        self.smooth = smooth

    def forward(self, logits, targets):
        probs = torch.sigmoid(logits)
        num = targets.size(0)
        m1, m2 = probs.view(num, -1), targets.view(num, -1)
        intersection = (m1 * m2).sum(1)
        score = (2.0 * intersection + self.smooth) / (m1.sum(1) + m2.sum(1) + self.smooth)
        return 1 - score.sum() / num


def synthetic_shapes(n, size, classes, seed=0):
    """``n`` images (N, 3, size, size) of noisy discs and squares on a gradient, and their masks: (N, 1, H, W)
    floats in {0, 1} for one class (anything), (N, H, W) class indices otherwise (0 background, 1 disc, 2 square)."""
    rs = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    images = np.empty((n, 3, size, size), np.float32)
    masks = np.zeros((n, size, size), np.int64)
    for i in range(n):
        for label in (1, 2):
            cy, cx = rs.uniform(0.25, 0.75, 2) * size
            r = rs.uniform(0.12, 0.25) * size
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 < r ** 2 if label == 1 else \
                (np.abs(yy - cy) < r) & (np.abs(xx - cx) < r)
            masks[i][inside] = label
        colours = rs.uniform(-1, 1, (3, 3))
        images[i] = colours[masks[i]].transpose(2, 0, 1) + 0.3 * rs.randn(3, size, size) + xx / size
    if classes == 1:
        return images, (masks > 0).astype(np.float32)[:, None]
    return images, masks


def criterion_for(model):
    bce, ce, soft_dice = nn.BCEWithLogitsLoss(), nn.CrossEntropyLoss(), SoftDiceLoss()

    def criterion(masks_pred, true_masks):
        if model.n_classes == 1:
            return bce(masks_pred, true_masks) + soft_dice(masks_pred, true_masks)
        return ce(masks_pred, true_masks) + dice_loss(
            F.softmax(masks_pred, dim=1).float(),
            F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(), multiclass=True)
    return criterion


@torch.inference_mode()
def evaluate(net, images, masks, batch_size):
    net.eval()
    dice_score = iou = 0.0
    batches = 0
    for start in range(0, len(images), batch_size):
        image, mask_true = images[start:start + batch_size], masks[start:start + batch_size]
        mask_pred = net(image)
        if net.n_classes == 1:
            assert mask_true.min() >= 0 and mask_true.max() <= 1, "True mask indices should be in [0, 1]"
            mask_pred = (F.sigmoid(mask_pred) > 0.5).float()
            dice_score += dice_coeff(mask_pred, mask_true, reduce_batch_first=False)
            inter = (mask_pred * mask_true).sum()
            union = mask_pred.sum() + mask_true.sum() - inter
        else:
            assert mask_true.min() >= 0 and mask_true.max() < net.n_classes, "True mask indices should be in [0, n)"
            mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()
            mask_pred = F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
            dice_score += multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False)
            inter = (mask_pred[:, 1:] * mask_true[:, 1:]).sum()
            union = mask_pred[:, 1:].sum() + mask_true[:, 1:].sum() - inter
        iou += (inter / union.clamp(min=1)).item()
        batches += 1
    net.train()
    return dice_score / max(batches, 1), iou / max(batches, 1)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=("transpose", "bilinear"), default="transpose", help="how the decoder upsamples")
    p.add_argument("--classes", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--train-size", type=int, default=16, help="images cycled through in order")
    p.add_argument("--image-size", type=int, default=22, help="odd sizes after pooling exercise the size fixes")
    p.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    p.add_argument("--lr", type=float, default=None, help="3e-3 for AdamW, 1e-2 for SGD")
    p.add_argument("--weight-decay", type=float, default=3e-5)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    if args.lr is None:
        args.lr = 1e-2 if args.optimizer == "sgd" else 3e-3
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = UNet(n_channels=3, n_classes=args.classes, bilinear=args.arch == "bilinear")
    model = model.to(device=device, memory_format=memory_format)
    if init is not None:
        init("model", dict(model.named_parameters()))
    poly = plateau = None
    if args.optimizer == "sgd":  # nnU-Net's recipe: nesterov SGD, momentum 0.99, a polynomial decay per step
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, momentum=0.99,
                                    nesterov=True)
        poly = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: (1 - step / args.steps) ** 0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "max", patience=1, factor=0.5)
    criterion = criterion_for(model)
    images, masks = synthetic_shapes(args.train_size, args.image_size, args.classes, seed=args.seed)
    images = torch.from_numpy(images).to(device=device, memory_format=memory_format)
    masks = torch.from_numpy(masks).to(device)
    val_images, val_masks = synthetic_shapes(8, args.image_size, args.classes, seed=args.seed + 1)
    val_images, val_masks = torch.from_numpy(val_images).to(device), torch.from_numpy(val_masks).to(device)
    batches = args.train_size // args.batch_size
    losses = []
    model.train()
    for step in range(args.steps):
        start = step % batches * args.batch_size
        image, true_masks = images[start:start + args.batch_size], masks[start:start + args.batch_size]
        assert image.shape[1] == model.n_channels, \
            f"Network has been defined with {model.n_channels} input channels, but loaded images have " \
            f"{image.shape[1]} channels. Please check that the images are loaded correctly."
        masks_pred = model(image)
        loss = criterion(masks_pred, true_masks)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if poly is not None:
            poly.step()
        losses.append(loss.item())
        if (step + 1) % args.eval_every == 0:
            val_score, val_iou = evaluate(model, val_images, val_masks, args.batch_size)
            if plateau is not None:
                plateau.step(val_score)
    val_score, val_iou = evaluate(model, val_images, val_masks, args.batch_size)
    print(f"unet ({args.arch}, {args.classes} classes): loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"validation Dice {float(val_score):.3f} IoU {val_iou:.3f}, lr {optimizer.param_groups[0]['lr']:.5f}")
    return losses


if __name__ == "__main__":
    print(main())
