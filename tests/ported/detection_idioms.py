"""A single-shot object detector (RetinaNet's losses on an SSD-sized model) written as PyTorch users write one without
torchvision: a small backbone of ``Conv2d`` + ``BatchNorm2d`` + ``ReLU(inplace=True)`` with stride-2 downsamples and
two 3x3 heads; anchors built with ``torch.meshgrid(..., indexing="ij")``, ``torch.arange``, ``stack``, ``repeat`` /
``repeat_interleave`` and ``reshape``; the IoU matrix by broadcasting (``boxes1[:, None, :2]``, ``clamp(min=0)``,
``prod``); SSD's matching (``argmax`` / ``max`` over both dimensions of the IoU matrix, each ground truth's best
anchor forced positive by ``index_fill_`` and index assignment, matched boxes by ``index_select``, their labels by
``torch.gather``, a foreground mask); Faster R-CNN's box coding with ``log`` / ``exp`` of the size ratios; a sigmoid
focal loss written by hand (``binary_cross_entropy_with_logits`` with ``reduction="none"``, ``torch.where``,
``pow``) or a softmax cross-entropy with SSD's hard-negative mining (a double ``sort``), both normalised by the
number of positives (``clamp(min=1)``); ``F.smooth_l1_loss(beta=1/9)`` on the positive anchors only (boolean-mask
indexing). The images hold a variable number of boxes: a small ``Dataset`` and a list-of-tensors ``collate_fn`` feed
a ``DataLoader``. SGD with momentum and weight decay, a linear warmup through ``LambdaLR``, ``clip_grad_norm_``. At
the end, inference under ``torch.no_grad``: decode, score threshold, ``topk`` over the flattened (anchor, class)
scores, a per-class greedy NMS written by hand (the class offset trick, ``argsort`` descending, a ``while`` loop
over a keep list) and a crude average precision at IoU 0.5 (``cumsum``). The data: filled rectangles of 3 classes
(by colour) on noise, drawn with NumPy from ``--seed``. Only the imports name the framework.

    python detection_idioms.py --steps 30

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 3
COLOURS = np.array([[1.0, -0.6, -0.6], [-0.6, 1.0, -0.6], [-0.6, -0.6, 1.0]], np.float32)


def rectangle_images(n, size=32, seed=0):
    """``n`` noisy images (N, 3, size, size), each with 1 to 3 filled rectangles; per image its boxes (G, 4) as
    (x1, y1, x2, y2) in pixels and their classes (G,)."""
    rs = np.random.RandomState(seed)
    images = (0.35 * rs.randn(n, 3, size, size)).astype(np.float32)
    boxes, labels = [], []
    for i in range(n):
        count = rs.randint(1, 4)
        b = np.empty((count, 4), np.float32)
        c = rs.randint(0, NUM_CLASSES, count)
        for j in range(count):
            w, h = rs.randint(6, 15, 2)
            x1, y1 = rs.randint(0, size - w + 1), rs.randint(0, size - h + 1)
            images[i, :, y1:y1 + h, x1:x1 + w] += COLOURS[c[j]][:, None, None]
            b[j] = (x1, y1, x1 + w, y1 + h)
        boxes.append(b)
        labels.append(c)
    return images, boxes, labels


class RectangleDataset(Dataset):
    def __init__(self, images, boxes, labels):
        self.images, self.boxes, self.labels = images, boxes, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = torch.from_numpy(self.images[index])
        boxes = torch.as_tensor(self.boxes[index], dtype=torch.float32)
        labels = torch.as_tensor(self.labels[index], dtype=torch.int64)
        return image, boxes, labels


def collate_fn(batch):
    """Images stacked; the boxes and labels, of a different count per image, as lists of tensors."""
    images, boxes, labels = zip(*batch)
    return torch.stack(images, 0), list(boxes), list(labels)


def conv_bn_relu(in_channels, out_channels, stride=1):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class SingleShotDetector(nn.Module):
    """A stride-4 feature map; per cell and anchor, ``num_outputs`` class logits and 4 box deltas."""

    def __init__(self, num_outputs, num_anchors, width=16, prior=0.01):
        super().__init__()
        self.backbone = nn.Sequential(
            conv_bn_relu(3, width),
            conv_bn_relu(width, 2 * width, stride=2),
            conv_bn_relu(2 * width, 2 * width),
            conv_bn_relu(2 * width, 2 * width, stride=2),
        )
        self.cls_head = nn.Conv2d(2 * width, num_anchors * num_outputs, 3, padding=1)
        self.box_head = nn.Conv2d(2 * width, num_anchors * 4, 3, padding=1)
        self.num_outputs = num_outputs
        for layer in (self.cls_head, self.box_head):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.constant_(layer.bias, 0)
        # RetinaNet's prior: every anchor starts as background with probability 1 - prior
        nn.init.constant_(self.cls_head.bias, -math.log((1 - prior) / prior))

    def forward(self, x):
        features = self.backbone(x)
        n = x.shape[0]
        # (N, A * C, H, W) -> (N, H * W * A, C): anchor order (y, x, a), as make_anchors lays them out
        cls = self.cls_head(features).permute(0, 2, 3, 1).reshape(n, -1, self.num_outputs)
        box = self.box_head(features).permute(0, 2, 3, 1).contiguous().view(n, -1, 4)
        return cls, box


def make_anchors(grid_size, stride, sizes=(8.0, 16.0), ratios=(0.5, 1.0, 2.0), device=None):
    """torchvision's AnchorGenerator for one feature map: (H * W * A, 4) boxes, A = len(sizes) * len(ratios)."""
    scales = torch.as_tensor(sizes, dtype=torch.float32, device=device)
    aspect = torch.as_tensor(ratios, dtype=torch.float32, device=device)
    h_ratios = torch.sqrt(aspect)
    w_ratios = 1 / h_ratios
    ws = (w_ratios[:, None] * scales[None, :]).view(-1)
    hs = (h_ratios[:, None] * scales[None, :]).view(-1)
    base = torch.stack([-ws, -hs, ws, hs], dim=1) / 2  # (A, 4) around the origin
    shifts = (torch.arange(0, grid_size, dtype=torch.float32, device=device) + 0.5) * stride
    shift_y, shift_x = torch.meshgrid(shifts, shifts, indexing="ij")
    shift_x, shift_y = shift_x.reshape(-1), shift_y.reshape(-1)
    centers = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=1)  # (H * W, 4)
    return centers.repeat_interleave(len(base), dim=0) + base.repeat(grid_size * grid_size, 1)


def box_iou(boxes1, boxes2):
    """The (N, M) IoU of two sets of (x1, y1, x2, y2) boxes."""
    area1 = (boxes1[:, 2:] - boxes1[:, :2]).prod(dim=1)
    area2 = (boxes2[:, 2:] - boxes2[:, :2]).prod(dim=1)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N, M, 2]
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N, M, 2]
    inter = (rb - lt).clamp(min=0).prod(dim=2)
    return inter / (area1[:, None] + area2 - inter)


def encode(matched, anchors, weights=(10.0, 10.0, 5.0, 5.0)):
    """Faster R-CNN's box deltas of ``matched`` relative to ``anchors`` (both (K, 4))."""
    wx, wy, ww, wh = weights
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    gw, gh = matched[:, 2] - matched[:, 0], matched[:, 3] - matched[:, 1]
    gx, gy = matched[:, 0] + 0.5 * gw, matched[:, 1] + 0.5 * gh
    dx, dy = wx * (gx - ax) / aw, wy * (gy - ay) / ah
    dw, dh = ww * torch.log(gw / aw), wh * torch.log(gh / ah)
    return torch.stack((dx, dy, dw, dh), dim=1)


def decode(deltas, anchors, weights=(10.0, 10.0, 5.0, 5.0), clip=math.log(1000.0 / 16)):
    wx, wy, ww, wh = weights
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    dx, dy = deltas[:, 0] / wx, deltas[:, 1] / wy
    dw, dh = torch.clamp(deltas[:, 2] / ww, max=clip), torch.clamp(deltas[:, 3] / wh, max=clip)
    cx, cy = dx * aw + ax, dy * ah + ay
    w, h = torch.exp(dw) * aw, torch.exp(dh) * ah
    return torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h), dim=1)


def match(anchors, gt_boxes, gt_labels, fg_iou=0.5, bg_iou=0.4):
    """SSD's matching for one image: each anchor's class target (0 background, 1 + class for an object, -1
    ignored) and the box it regresses to; every ground truth keeps its best anchor whatever the IoU."""
    overlaps = box_iou(gt_boxes, anchors)  # (G, K)
    best_anchor_idx = overlaps.argmax(dim=1)  # each ground truth's best anchor
    best_truth_overlap, best_truth_idx = overlaps.max(0)  # each anchor's best ground truth
    best_truth_overlap.index_fill_(0, best_anchor_idx, 2.0)
    for j in range(best_anchor_idx.size(0)):
        best_truth_idx[best_anchor_idx[j]] = j
    matched = gt_boxes.index_select(0, best_truth_idx)
    conf = torch.gather(gt_labels, 0, best_truth_idx) + 1
    conf[best_truth_overlap < fg_iou] = -1
    conf[best_truth_overlap < bg_iou] = 0
    return conf, matched


def sigmoid_focal_loss(logits, targets, alpha=0.25, gamma=2.0):
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = torch.where(targets == 1, p, 1 - p)
    alpha_t = torch.where(targets == 1, alpha, 1 - alpha)
    return alpha_t * ce * (1 - p_t).pow(gamma)


def classification_loss(cls_logits, conf, kind, neg_pos_ratio=3):
    """The summed classification loss over the anchors that count (``conf`` >= 0 for the focal loss; the positives
    and the hardest negatives, ``neg_pos_ratio`` of them per positive, for the cross-entropy)."""
    pos = conf > 0
    if kind == "focal":
        valid = conf >= 0
        targets = torch.zeros_like(cls_logits)
        idx = pos.nonzero(as_tuple=True)
        targets[idx + (conf[pos] - 1,)] = 1.0  # one-hot, no background column
        loss = sigmoid_focal_loss(cls_logits, targets)
        return loss[valid].sum()
    loss_c = F.cross_entropy(cls_logits.reshape(-1, cls_logits.shape[-1]), conf.clamp(min=0).reshape(-1),
                             reduction="none").view(conf.shape)
    with torch.no_grad():
        mining = loss_c.clone()
        mining[pos | (conf < 0)] = 0  # only the negatives compete
        _, loss_idx = mining.sort(1, descending=True)
        _, idx_rank = loss_idx.sort(1)
        num_pos = pos.long().sum(1, keepdim=True)
        num_neg = torch.clamp(neg_pos_ratio * num_pos, max=pos.size(1) - 1)
        neg = idx_rank < num_neg.expand_as(idx_rank)
    return loss_c[pos | neg].sum()


def nms(boxes, scores, iou_threshold):
    """Greedy non-maximum suppression: the indices kept, by decreasing score."""
    x1, y1, x2, y2 = boxes.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i.item())
        if order.numel() == 1:
            break
        rest = order[1:]
        xx1 = torch.clamp(torch.index_select(x1, 0, rest), min=x1[i])
        yy1 = torch.clamp(torch.index_select(y1, 0, rest), min=y1[i])
        xx2 = torch.clamp(torch.index_select(x2, 0, rest), max=x2[i])
        yy2 = torch.clamp(torch.index_select(y2, 0, rest), max=y2[i])
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        iou = inter / (areas[i] + areas[rest] - inter)
        order = rest[iou <= iou_threshold]
    return torch.tensor(keep, dtype=torch.long, device=boxes.device)


def batched_nms(boxes, scores, classes, iou_threshold):
    """NMS within each class at once: the boxes of different classes shifted apart so that they never overlap."""
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    offsets = classes.to(boxes) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)


@torch.no_grad()
def detect(model, images, anchors, kind, score_threshold=0.2, candidates=50, iou_threshold=0.5, size=32):
    """Per image, the (boxes, scores, classes) detected."""
    cls_logits, deltas = model(images)
    if kind == "focal":
        probs = cls_logits.sigmoid()
    else:
        probs = F.softmax(cls_logits, dim=-1)[..., 1:]
    results = []
    for p, d in zip(probs, deltas):
        # torchvision's RetinaNet: the best (anchor, class) pairs over the flattened scores
        num_classes = p.shape[-1]
        scores = p.flatten()
        keep = scores > score_threshold
        scores = scores[keep]
        topk_idxs = torch.where(keep)[0]
        scores, idxs = scores.topk(min(candidates, topk_idxs.size(0)))
        topk_idxs = topk_idxs[idxs]
        anchor_idxs = torch.div(topk_idxs, num_classes, rounding_mode="floor")
        classes = topk_idxs % num_classes
        boxes = decode(d[anchor_idxs], anchors[anchor_idxs])
        boxes[:, 0::2] = boxes[:, 0::2].clamp(min=0, max=size)
        boxes[:, 1::2] = boxes[:, 1::2].clamp(min=0, max=size)
        keep = batched_nms(boxes, scores, classes, iou_threshold)
        results.append((boxes[keep], scores[keep], classes[keep]))
    return results


def average_precision(detections, gt_boxes, gt_labels, iou_threshold=0.5):
    """A crude mAP at IoU 0.5: per class, the detections of all images by decreasing score, each a hit when it
    overlaps a ground truth of its class not yet taken; AP is the mean precision at the hits over the ground
    truths."""
    aps = []
    for c in range(NUM_CLASSES):
        scores, hits, total = [], [], 0
        for (boxes, s, classes), gt, labels in zip(detections, gt_boxes, gt_labels):
            gt = gt[labels == c]
            total += gt.shape[0]
            mine = classes == c
            boxes, s = boxes[mine], s[mine]
            taken = torch.zeros(gt.shape[0], dtype=torch.bool, device=gt.device)
            for k in s.argsort(descending=True).tolist():
                hit = False
                if gt.shape[0]:
                    iou = box_iou(boxes[k:k + 1], gt)[0]
                    iou[taken] = -1
                    best = int(iou.argmax())
                    if iou[best] >= iou_threshold:
                        taken[best], hit = True, True
                scores.append(float(s[k]))
                hits.append(hit)
        if total == 0:
            continue
        if not hits:
            aps.append(0.0)
            continue
        order = torch.tensor(scores).argsort(descending=True)
        tp = torch.tensor(hits, dtype=torch.float32)[order]
        precision = torch.cumsum(tp, 0) / torch.arange(1, len(tp) + 1)
        aps.append(float((precision * tp).sum() / total))
    return sum(aps) / max(len(aps), 1)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--train-size", type=int, default=64)
    p.add_argument("--val-size", type=int, default=16)
    p.add_argument("--loss", choices=("focal", "ce"), default="focal")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--clip", type=float, default=10.0)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    size, stride = 32, 4
    dataset = RectangleDataset(*rectangle_images(args.train_size, size, seed=args.seed))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=not args.no_shuffle, drop_last=True,
                        collate_fn=collate_fn)
    val_dataset = RectangleDataset(*rectangle_images(args.val_size, size, seed=args.seed + 1))
    val_loader = DataLoader(val_dataset, batch_size=args.batch_size, collate_fn=collate_fn)
    anchors = make_anchors(size // stride, stride, device=device)
    num_anchors = anchors.shape[0] // (size // stride) ** 2
    num_outputs = NUM_CLASSES if args.loss == "focal" else NUM_CLASSES + 1  # the softmax has a background class

    model = SingleShotDetector(num_outputs, num_anchors).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: min(1.0, (it + 1) / args.warmup))

    losses, step = [], 0
    model.train()
    while step < args.steps:
        for images, gt_boxes, gt_labels in loader:
            if step == args.steps:
                break
            images = images.to(device)
            gt_boxes = [b.to(device) for b in gt_boxes]
            gt_labels = [c.to(device) for c in gt_labels]
            cls_logits, deltas = model(images)

            conf, matched = [], []
            for boxes, labels in zip(gt_boxes, gt_labels):
                c, m = match(anchors, boxes, labels)
                conf.append(c)
                matched.append(m)
            conf, matched = torch.stack(conf), torch.stack(matched)
            pos = conf > 0
            num_pos = pos.sum().clamp(min=1).float()

            cls_loss = classification_loss(cls_logits, conf, args.loss) / num_pos
            box_targets = encode(matched[pos], anchors.unsqueeze(0).expand_as(matched)[pos])
            box_loss = F.smooth_l1_loss(deltas[pos], box_targets, beta=1.0 / 9, reduction="sum") / num_pos
            loss = cls_loss + box_loss

            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            step += 1

    model.eval()
    detections, gts, labels = [], [], []
    for images, gt_boxes, gt_labels in val_loader:
        detections += detect(model, images.to(device), anchors, args.loss, size=size)
        gts += [b.to(device) for b in gt_boxes]
        labels += [c.to(device) for c in gt_labels]
    found = sum(len(d[0]) for d in detections)
    print(f"{found} detections on {len(detections)} images, mAP@0.5 {average_precision(detections, gts, labels):.3f}, "
          f"lr {scheduler.get_last_lr()[0]:.4f}")
    return losses


if __name__ == "__main__":
    print(main())
