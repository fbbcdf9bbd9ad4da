"""Semantic segmentation and detection utilities as PyTorch users write them (DeepLabV3's and torchvision's
recipes, by hand): an encoder whose last stages keep their resolution with dilated 3x3 convolutions
(``dilation=2`` and ``4``, ``padding=dilation``), an ASPP head (a 1x1 branch, dilated 3x3 branches and an
image-pooling branch, ``nn.AdaptiveAvgPool2d(1)`` brought back by ``F.interpolate(mode='bilinear',
align_corners=False)``, concatenated and projected by a 1x1 convolution), ``BatchNorm2d`` + ``ReLU`` throughout,
the logits upsampled to the input's size. The loss: ``nn.CrossEntropyLoss(weight=class_weights,
ignore_index=255)`` (or a focal loss from ``reduction='none'`` cross-entropy, by ``--seg-loss focal``) plus a soft
Dice loss over the softmax and ``F.one_hot(...).permute(0, 3, 1, 2)`` of the valid labels. Each step, without
gradients, a confusion matrix from ``torch.bincount(n * target[valid] + pred[valid], minlength=n * n)`` and the
mean IoU from it. A small detection head on a coarser grid scores and regresses boxes against anchors built with
``torch.meshgrid(..., indexing='ij')``: anchors matched to the ground truth by a hand-written ``box_iou``
(``torch.max`` / ``torch.min`` of broadcast corners, ``clamp(min=0)``), box deltas trained with
``F.smooth_l1_loss(beta=...)`` (or ``F.huber_loss(delta=...)``), objectness with
``F.binary_cross_entropy_with_logits``; the decoded boxes pruned by a greedy NMS written as a ``while`` loop over
the sorted scores. Nesterov SGD with a ``StepLR`` or a polynomial ``LambdaLR``. The data: images of coloured
ellipses on a noisy background drawn with NumPy from ``--seed``, 4 classes, the pixels on class boundaries
labelled 255 (ignored). Only the imports name the framework.

    python segmentation_idioms.py --steps 20

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

IGNORE = 255


def conv_bn_relu(in_channels, out_channels, kernel_size=3, stride=1, dilation=1):
    padding = 0 if kernel_size == 1 else dilation
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                  bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class ASPPPooling(nn.Sequential):
    def __init__(self, in_channels, out_channels):
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x):
        size = x.shape[-2:]
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, in_channels, atrous_rates, out_channels=32):
        super().__init__()
        modules = [conv_bn_relu(in_channels, out_channels, kernel_size=1)]
        for rate in atrous_rates:
            modules.append(conv_bn_relu(in_channels, out_channels, dilation=rate))
        modules.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(modules)
        self.project = conv_bn_relu(len(self.convs) * out_channels, out_channels, kernel_size=1)

    def forward(self, x):
        res = []
        for conv in self.convs:
            res.append(conv(x))
        res = torch.cat(res, dim=1)
        return self.project(res)


class SegDetNet(nn.Module):
    """A stride-2 encoder kept at 1/2 resolution by dilation, an ASPP segmentation head, and a detection head
    one stride further down that predicts, per anchor, an objectness logit and 4 box deltas."""

    def __init__(self, num_classes=4, num_anchors=2, width=16):
        super().__init__()
        self.encoder = nn.Sequential(
            conv_bn_relu(3, width),
            conv_bn_relu(width, 2 * width, stride=2),
            conv_bn_relu(2 * width, 2 * width, dilation=2),
            conv_bn_relu(2 * width, 2 * width, dilation=4),
        )
        self.aspp = ASPP(2 * width, atrous_rates=(2, 4), out_channels=2 * width)
        self.classifier = nn.Conv2d(2 * width, num_classes, 1)
        self.det = conv_bn_relu(2 * width, 2 * width, stride=2)
        self.det_out = nn.Conv2d(2 * width, num_anchors * 5, 1)
        self.num_anchors = num_anchors

    def forward(self, x):
        size = x.shape[-2:]
        features = self.encoder(x)
        logits = self.classifier(self.aspp(features))
        logits = F.interpolate(logits, size=size, mode="bilinear", align_corners=False)
        det = self.det_out(self.det(features))  # (N, A * 5, h, w)
        n, _, h, w = det.shape
        # anchor order: (y, x, a), as make_anchors lays them out
        det = det.view(n, self.num_anchors, 5, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, 5)
        return logits, det[..., 0], det[..., 1:]


def make_anchors(grid_h, grid_w, stride, sizes, device=None):
    """Square anchors (x1, y1, x2, y2) centred on every cell of a ``grid_h`` x ``grid_w`` grid, one per size."""
    shifts_y = (torch.arange(grid_h, dtype=torch.float32, device=device) + 0.5) * stride
    shifts_x = (torch.arange(grid_w, dtype=torch.float32, device=device) + 0.5) * stride
    shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
    centers = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=-1).reshape(-1, 1, 4)
    half = torch.tensor(sizes, dtype=torch.float32, device=device).view(1, -1, 1) / 2
    offsets = torch.cat([-half, -half, half, half], dim=-1)  # (1, A, 4)
    return (centers + offsets).reshape(-1, 4)


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    """The (N, M) IoU of two sets of (x1, y1, x2, y2) boxes."""
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N, M, 2]
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N, M, 2]
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union


def nms(boxes, scores, iou_threshold):
    """Greedy non-maximum suppression: the indices kept, by decreasing score."""
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i)
        if order.numel() == 1:
            break
        iou = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]]).squeeze(0)
        order = order[1:][iou <= iou_threshold]
    return torch.stack(keep) if keep else torch.empty(0, dtype=torch.long, device=boxes.device)


def encode(gt, anchors):
    """Faster R-CNN's box deltas of ``gt`` relative to ``anchors`` (both (K, 4))."""
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    return torch.stack(((gx - ax) / aw, (gy - ay) / ah, torch.log(gw / aw), torch.log(gh / ah)), dim=1)


def decode(deltas, anchors, clip=math.log(1000.0 / 16)):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    dx, dy, dw, dh = deltas.unbind(-1)
    dw, dh = dw.clamp(max=clip), dh.clamp(max=clip)
    cx, cy = ax + dx * aw, ay + dy * ah
    w, h = aw * torch.exp(dw), ah * torch.exp(dh)
    return torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h), dim=-1)


def match_anchors(anchors, gt_boxes, fg_iou=0.5, bg_iou=0.3):
    """Per image: each anchor's ground-truth box, and its label (1 object, 0 background, -1 ignored); the best
    anchor of every box is an object whatever its IoU."""
    labels, matched = [], []
    for boxes in gt_boxes:
        iou = box_iou(anchors, boxes)  # (K, G)
        best_iou, best_gt = iou.max(dim=1)
        label = torch.full_like(best_iou, -1.0)
        label[best_iou < bg_iou] = 0.0
        label[best_iou >= fg_iou] = 1.0
        label[iou.argmax(dim=0)] = 1.0
        labels.append(label)
        matched.append(boxes[best_gt])
    return torch.stack(labels), torch.stack(matched)


def dice_loss(logits, target, num_classes, eps=1.0):
    """1 - the mean over classes of the soft Dice between the softmax and the one-hot labels, valid pixels only."""
    valid = (target != IGNORE).unsqueeze(1)
    probs = F.softmax(logits, dim=1) * valid
    one_hot = F.one_hot(target.masked_fill(target == IGNORE, 0), num_classes).permute(0, 3, 1, 2).float()
    one_hot = one_hot * valid
    dims = (0, 2, 3)
    intersection = torch.sum(probs * one_hot, dims)
    cardinality = torch.sum(probs + one_hot, dims)
    dice = (2.0 * intersection + eps) / (cardinality + eps)
    return 1.0 - dice.mean()


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, weight=None, ignore_index=IGNORE):
        super().__init__()
        self.gamma, self.ignore_index = gamma, ignore_index
        self.register_buffer("weight", weight)

    def forward(self, logits, target):
        ce = F.cross_entropy(logits, target, reduction="none", ignore_index=self.ignore_index)
        pt = torch.exp(-ce)  # the probability of the true class
        valid = target != self.ignore_index
        w = self.weight[target.clamp(max=len(self.weight) - 1)] if self.weight is not None else 1.0
        loss = w * (1 - pt) ** self.gamma * ce
        return loss[valid].sum() / valid.sum().clamp(min=1)


def fast_hist(target, pred, n):
    valid = (target >= 0) & (target < n)
    return torch.bincount(n * target[valid] + pred[valid], minlength=n * n).reshape(n, n)


def mean_iou(hist):
    iou = torch.diag(hist) / (hist.sum(0) + hist.sum(1) - torch.diag(hist))
    return torch.nanmean(iou).item(), iou


def ellipse_images(n, size=32, num_classes=4, seed=0):
    """``n`` noisy images (N, 3, size, size) of two coloured ellipses each, their labels (N, size, size) with the
    class boundaries set to 255, and the ellipses' boxes (N, 2, 4) as (x1, y1, x2, y2) in pixels."""
    rs = np.random.RandomState(seed)
    palette = rs.uniform(-1, 1, (num_classes, 3)).astype(np.float32)
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    images = np.empty((n, 3, size, size), np.float32)
    masks = np.zeros((n, size, size), np.int64)
    boxes = np.empty((n, 2, 4), np.float32)
    for i in range(n):
        for j in range(2):
            cy, cx = rs.uniform(0.25, 0.75, 2) * size
            ry, rx = rs.uniform(0.12, 0.25, 2) * size
            masks[i][((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1] = rs.randint(1, num_classes)
            boxes[i, j] = np.clip([cx - rx, cy - ry, cx + rx, cy + ry], 0, size)
        images[i] = palette[masks[i]].transpose(2, 0, 1) + 0.4 * rs.randn(3, size, size)
    padded = np.pad(masks, ((0, 0), (1, 1), (1, 1)), mode="edge")
    edge = np.zeros_like(masks, bool)
    for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2)):
        edge |= padded[:, dy:dy + size, dx:dx + size] != masks
    masks[edge] = IGNORE
    return images, masks, boxes


def class_weights(masks, num_classes):
    """ENet's weights, 1 / ln(1.02 + frequency), over the labelled pixels."""
    labels = masks[masks != IGNORE]
    freq = torch.bincount(labels, minlength=num_classes).float() / labels.numel()
    return 1.0 / torch.log(1.02 + freq)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--train-size", type=int, default=64)
    p.add_argument("--seg-loss", choices=("ce", "focal"), default="ce", help="the term added to the Dice loss")
    p.add_argument("--box-loss", choices=("smooth_l1", "huber"), default="smooth_l1")
    p.add_argument("--beta", type=float, default=1.0 / 9, help="smooth L1's beta, Huber's delta")
    p.add_argument("--scheduler", choices=("poly", "step"), default="poly")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    num_classes = 4
    images, masks, boxes = ellipse_images(args.train_size, num_classes=num_classes, seed=args.seed)
    dataset = TensorDataset(torch.from_numpy(images), torch.from_numpy(masks), torch.from_numpy(boxes))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=not args.no_shuffle, drop_last=True)
    weights = class_weights(torch.from_numpy(masks), num_classes).to(device)

    model = SegDetNet(num_classes).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    anchors = make_anchors(8, 8, stride=4, sizes=(8.0, 16.0), device=device)
    if args.seg_loss == "focal":
        seg_criterion = FocalLoss(gamma=2.0, weight=weights).to(device)
    else:
        seg_criterion = nn.CrossEntropyLoss(weight=weights, ignore_index=IGNORE)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    if args.scheduler == "poly":
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: (1 - it / args.steps) ** 0.9)
    else:
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=max(1, args.steps // 3), gamma=0.5)

    hist = torch.zeros(num_classes, num_classes, dtype=torch.long, device=device)
    losses, step, miou = [], 0, float("nan")
    model.train()
    while step < args.steps:
        for image, target, gt_boxes in loader:
            if step == args.steps:
                break
            image, target, gt_boxes = image.to(device), target.to(device), gt_boxes.to(device)
            logits, objectness, deltas = model(image)
            seg_loss = seg_criterion(logits, target) + dice_loss(logits, target, num_classes)

            labels, matched = match_anchors(anchors, gt_boxes)
            pos, sampled = labels == 1, labels >= 0
            box_targets = encode(matched[pos], anchors.expand_as(matched)[pos])
            if args.box_loss == "huber":
                box_loss = F.huber_loss(deltas[pos], box_targets, delta=args.beta, reduction="sum")
            else:
                box_loss = F.smooth_l1_loss(deltas[pos], box_targets, beta=args.beta, reduction="sum")
            box_loss = box_loss / sampled.sum()
            obj_loss = F.binary_cross_entropy_with_logits(objectness[sampled], labels[sampled])
            loss = seg_loss + box_loss + obj_loss

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            with torch.no_grad():
                hist += fast_hist(target.flatten(), logits.argmax(1).flatten(), num_classes)
                miou, iou = mean_iou(hist)
            step += 1

    model.eval()
    with torch.no_grad():
        image, target, gt_boxes = next(iter(loader))
        logits, objectness, deltas = model(image.to(device))
        found = 0
        for scores, d, gt in zip(objectness.sigmoid(), deltas, gt_boxes.to(device)):
            detected = decode(d, anchors)
            keep = nms(detected, scores, iou_threshold=0.5)[:5]
            found += (box_iou(gt, detected[keep]).max(dim=1).values >= 0.5).sum().item()
    print(f"training mIoU {miou:.3f} (per class {[round(v, 3) for v in iou.tolist()]}), boxes recalled at IoU 0.5: "
          f"{found}/{gt_boxes.shape[0] * gt_boxes.shape[1]}, lr {scheduler.get_last_lr()[0]:.5f}")
    return losses


if __name__ == "__main__":
    print(main())
