"""Human-pose (keypoint) estimation by heatmaps as PyTorch users write it (Simple Baselines, HRNet, the stacked
hourglass repos), on synthetic 32x32 stick figures: five keypoints (head, hands, feet) drawn as bright dots joined
by dimmer limbs, the figure's left on the image's right so that a horizontal flip swaps the left and right joints.

- data: a ``Dataset`` whose ``__getitem__`` draws the figure after its augmentation (a random flip that mirrors
  the joints and swaps the flip pairs, a random shift), HRNet's ``generate_target`` (a Gaussian heatmap per joint
  written into a zero array by clipped slices, the target weights, the joints' visibility, as a (K, 1) array),
  a ``meta`` dict collated by the ``DataLoader`` into a batch of tensors;
- ``--arch simple``: Simple Baselines' PoseResNet: a ResNet stem and ``BasicBlock`` s (``Conv2d``, ``BatchNorm2d``,
  ``ReLU(inplace=True)``, a 1x1 ``downsample``), a deconvolution head (``nn.ConvTranspose2d(kernel_size=4,
  stride=2, padding=1, output_padding=0, bias=False)`` + BN + ReLU, from ``_get_deconv_cfg``) and a final 1x1
  conv, initialised by ``normal_(std=0.001)`` over ``named_modules()``;
- ``--arch hourglass``: bearpaw's stacked hourglass: pre-activation bottlenecks, an ``Hourglass`` built and run
  recursively (``nn.MaxPool2d(2, 2)``, ``F.interpolate(scale_factor=2, mode="nearest")`` in the inner levels and
  ``nn.Upsample`` in the outer one, skip adds) in ``nn.ModuleList`` s, two stacks whose intermediate heatmaps are
  all supervised, the re-injection ``x = x + self.fc_[i](y) + self.score_[i](score)``;
- ``--loss mse``: ``JointsMSELoss`` (``output.reshape((batch_size, num_joints, -1)).split(1, 1)``, per joint
  ``squeeze()``, ``mul(target_weight[:, idx])``, ``0.5 * criterion(...)``, averaged over the joints); ``ohkm``:
  ``JointsOHKMMSELoss`` (``reduction="none"`` per joint, ``torch.cat`` of the per-joint means, ``torch.topk``
  with ``sorted=False`` and ``torch.gather`` per sample); ``integral``: integral regression (soft-argmax:
  ``F.softmax(heatmaps.view(B, K, -1) * beta, dim=2)``, the expected coordinates over ``torch.arange`` /
  ``torch.linspace`` grids by ``sum(dim=...)``, ``F.l1_loss`` on visibility-weighted normalized coordinates);
- ``get_max_preds`` on tensors (``torch.max(..., 2)``, ``idx % width``, ``torch.floor(idx / width)`` or
  ``torch.div(..., rounding_mode="floor")``, ``pred_mask = maxvals.gt(0.0).repeat(1, 1, 2).float()``) for the
  training accuracy, and its NumPy twin on ``.detach().cpu().numpy()`` for the evaluation, refined by a quarter
  pixel toward the larger neighbour (``torch.sign`` of the neighbour differences, indexed joint by joint);
- a flip test at the end under ``torch.no_grad()``: ``torch.flip(x, [3])`` input, the heatmaps flipped back with
  the flip pairs swapped (``--flip-back assign``: advanced-index assignment on a clone; ``index_select``: a
  permutation), shifted one pixel (``output_flipped[:, :, :, 1:] = output_flipped.clone()[:, :, :, 0:-1]``) and
  averaged, the PCK of the predictions (``torch.linalg.norm`` of normalized distances, -1 for invisible joints,
  ``torch.where``, boolean indexing) printed, as the training accuracy (``torch.norm``) is;
- training: Adam with ``MultiStepLR(milestones=..., gamma=0.1)``, ``model.train()`` / ``model.eval()``,
  ``AverageMeter`` s fed by ``.item()``.

The figures, their visibility and every augmentation choice come from NumPy seeded by ``--seed``; the batches from
a ``DataLoader`` (shuffled by the framework's generator unless ``--no-shuffle``). Only the imports name the
framework.

    python keypoint_idioms.py --arch simple --loss mse --steps 20

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import MultiStepLR
from torch.utils.data import DataLoader, Dataset

IMAGE_SIZE = 32
JOINTS = ("head", "l_hand", "r_hand", "l_foot", "r_foot")
FLIP_PAIRS = ((1, 2), (3, 4))
# where each joint sits around the figure's centre (x, y), before jitter: the figure's left is the image's right
OFFSETS = np.array([(0, -9), (7, -3), (-7, -3), (4, 9), (-4, 9)], np.float32)

# ------------------------------------------------------------------------------------------------ data


def random_figures(n, rs):
    """Joints (n, K, 2) in pixels and their visibility (n, K), a joint hidden with probability 0.1."""
    centres = rs.uniform(13, 19, (n, 1, 2)).astype(np.float32)
    joints = centres + OFFSETS + rs.uniform(-1.5, 1.5, (n, len(JOINTS), 2)).astype(np.float32)
    visible = (rs.rand(n, len(JOINTS)) > 0.1).astype(np.float32)
    return np.clip(joints, 1, IMAGE_SIZE - 2), visible


def draw(joints, visible, noise):
    """A 3-channel image of the figure: limbs from the centre of the joints to each visible one, dots on them."""
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float32)
    image = np.zeros((IMAGE_SIZE, IMAGE_SIZE), np.float32)
    centre = joints[1:].mean(axis=0)
    for (x, y), v in zip(joints, visible):
        if not v:
            continue
        for t in np.linspace(0, 1, 12):
            px, py = centre[0] + t * (x - centre[0]), centre[1] + t * (y - centre[1])
            image = np.maximum(image, 0.4 * np.exp(-((xx - px) ** 2 + (yy - py) ** 2) / 0.8))
        image = np.maximum(image, np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / 1.5))
    tint = np.array([1.0, 0.8, 0.6], np.float32)[:, None, None]
    return (tint * image + noise).astype(np.float32)


def generate_target(joints, joints_vis, heatmap_size, sigma=1):
    """HRNet's Gaussian targets: (K, H, W) heatmaps and (K, 1) target weights."""
    num_joints = len(joints)
    target_weight = joints_vis[:, None].astype(np.float32)
    target = np.zeros((num_joints, heatmap_size, heatmap_size), dtype=np.float32)
    tmp_size = sigma * 3
    feat_stride = IMAGE_SIZE / heatmap_size
    for joint_id in range(num_joints):
        mu_x = int(joints[joint_id][0] / feat_stride + 0.5)
        mu_y = int(joints[joint_id][1] / feat_stride + 0.5)
        ul = [int(mu_x - tmp_size), int(mu_y - tmp_size)]
        br = [int(mu_x + tmp_size + 1), int(mu_y + tmp_size + 1)]
        if ul[0] >= heatmap_size or ul[1] >= heatmap_size or br[0] < 0 or br[1] < 0:
            target_weight[joint_id] = 0
            continue
        size = 2 * tmp_size + 1
        x = np.arange(0, size, 1, np.float32)
        y = x[:, np.newaxis]
        x0 = y0 = size // 2
        g = np.exp(-((x - x0) ** 2 + (y - y0) ** 2) / (2 * sigma ** 2))
        g_x = max(0, -ul[0]), min(br[0], heatmap_size) - ul[0]
        g_y = max(0, -ul[1]), min(br[1], heatmap_size) - ul[1]
        img_x = max(0, ul[0]), min(br[0], heatmap_size)
        img_y = max(0, ul[1]), min(br[1], heatmap_size)
        if target_weight[joint_id] > 0.5:
            target[joint_id][img_y[0]:img_y[1], img_x[0]:img_x[1]] = g[g_y[0]:g_y[1], g_x[0]:g_x[1]]
    return target, target_weight


class FigureDataset(Dataset):
    def __init__(self, n, heatmap_size, seed, train=True):
        self.rs = np.random.RandomState(seed)
        self.joints, self.visible = random_figures(n, self.rs)
        self.heatmap_size, self.train = heatmap_size, train

    def __len__(self):
        return len(self.joints)

    def __getitem__(self, idx):
        joints, joints_vis = self.joints[idx].copy(), self.visible[idx].copy()
        if self.train:
            joints += self.rs.randint(-2, 3, 2).astype(np.float32)
            if self.rs.rand() < 0.5:  # mirror the figure: its left joints become its right ones
                joints[:, 0] = IMAGE_SIZE - 1 - joints[:, 0]
                for a, b in FLIP_PAIRS:
                    joints[[a, b]] = joints[[b, a]]
                    joints_vis[[a, b]] = joints_vis[[b, a]]
        noise = 0.05 * self.rs.randn(3, IMAGE_SIZE, IMAGE_SIZE).astype(np.float32)
        image = torch.from_numpy(draw(joints, joints_vis, noise))
        target, target_weight = generate_target(joints, joints_vis, self.heatmap_size)
        meta = {"index": idx, "joints": joints, "joints_vis": joints_vis}
        return image, torch.from_numpy(target), torch.from_numpy(target_weight), meta


# ------------------------------------------------------------------------------------------------ Simple Baselines

BN_MOMENTUM = 0.1


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes, momentum=BN_MOMENTUM)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes, momentum=BN_MOMENTUM)
        self.downsample = downsample

    def forward(self, x):
        residual = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        out += residual
        return self.relu(out)


class PoseResNet(nn.Module):
    """32x32 images to 16x16 heatmaps: a stride-8 backbone (4x4), two deconvolutions back up to stride 2."""

    def __init__(self, num_joints, layers=(1, 1), planes=(16, 32), num_deconv_filters=(32, 32)):
        super().__init__()
        self.inplanes = 16
        self.deconv_with_bias = False
        self.conv1 = nn.Conv2d(3, 16, kernel_size=5, stride=2, padding=2, bias=False)
        self.bn1 = nn.BatchNorm2d(16, momentum=BN_MOMENTUM)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(BasicBlock, planes[0], layers[0])
        self.layer2 = self._make_layer(BasicBlock, planes[1], layers[1], stride=2)
        self.deconv_layers = self._make_deconv_layer(len(num_deconv_filters), num_deconv_filters,
                                                     [4] * len(num_deconv_filters))
        self.final_layer = nn.Conv2d(num_deconv_filters[-1], num_joints, kernel_size=1, stride=1, padding=0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion, momentum=BN_MOMENTUM),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def _get_deconv_cfg(self, deconv_kernel, index):
        if deconv_kernel == 4:
            padding, output_padding = 1, 0
        elif deconv_kernel == 3:
            padding, output_padding = 1, 1
        elif deconv_kernel == 2:
            padding, output_padding = 0, 0
        return deconv_kernel, padding, output_padding

    def _make_deconv_layer(self, num_layers, num_filters, num_kernels):
        layers = []
        for i in range(num_layers):
            kernel, padding, output_padding = self._get_deconv_cfg(num_kernels[i], i)
            planes = num_filters[i]
            layers.append(nn.ConvTranspose2d(in_channels=self.inplanes, out_channels=planes, kernel_size=kernel,
                                             stride=2, padding=padding, output_padding=output_padding,
                                             bias=self.deconv_with_bias))
            layers.append(nn.BatchNorm2d(planes, momentum=BN_MOMENTUM))
            layers.append(nn.ReLU(inplace=True))
            self.inplanes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = self.deconv_layers(x)
        return self.final_layer(x)

    def init_weights(self):
        for name, m in self.deconv_layers.named_modules():
            if isinstance(m, nn.ConvTranspose2d):
                nn.init.normal_(m.weight, std=0.001)
                if self.deconv_with_bias:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        for m in self.final_layer.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.001)
                nn.init.constant_(m.bias, 0)


# ------------------------------------------------------------------------------------------------ stacked hourglass


class Bottleneck(nn.Module):
    """The hourglass repos' pre-activation bottleneck."""
    expansion = 2

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(inplanes)
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=1, bias=True)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=stride, padding=1, bias=True)
        self.bn3 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 2, kernel_size=1, bias=True)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        residual = x
        out = self.conv1(self.relu(self.bn1(x)))
        out = self.conv2(self.relu(self.bn2(out)))
        out = self.conv3(self.relu(self.bn3(out)))
        if self.downsample is not None:
            residual = self.downsample(x)
        out += residual
        return out


class Hourglass(nn.Module):
    def __init__(self, block, num_blocks, planes, depth):
        super().__init__()
        self.depth = depth
        self.block = block
        self.pool = nn.MaxPool2d(2, 2)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.hg = self._make_hour_glass(block, num_blocks, planes, depth)

    def _make_residual(self, block, num_blocks, planes):
        return nn.Sequential(*[block(planes * block.expansion, planes) for _ in range(num_blocks)])

    def _make_hour_glass(self, block, num_blocks, planes, depth):
        hg = []
        for i in range(depth):
            res = [self._make_residual(block, num_blocks, planes) for _ in range(3)]
            if i == 0:
                res.append(self._make_residual(block, num_blocks, planes))
            hg.append(nn.ModuleList(res))
        return nn.ModuleList(hg)

    def _hour_glass_forward(self, n, x):
        up1 = self.hg[n - 1][0](x)
        low1 = self.pool(x)
        low1 = self.hg[n - 1][1](low1)
        if n > 1:
            low2 = self._hour_glass_forward(n - 1, low1)
        else:
            low2 = self.hg[n - 1][3](low1)
        low3 = self.hg[n - 1][2](low2)
        up2 = self.upsample(low3) if n == self.depth else F.interpolate(low3, scale_factor=2, mode="nearest")
        return up1 + up2

    def forward(self, x):
        return self._hour_glass_forward(self.depth, x)


class HourglassNet(nn.Module):
    """32x32 images to 8x8 heatmaps, one per stack."""

    def __init__(self, block, num_stacks=2, num_blocks=1, num_classes=5, depth=2):
        super().__init__()
        self.inplanes = 8
        self.num_feats = 8
        self.num_stacks = num_stacks
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=True)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_residual(block, self.inplanes, 1)
        self.layer2 = self._make_residual(block, self.inplanes, 1)
        self.layer3 = self._make_residual(block, self.num_feats, 1)
        self.maxpool = nn.MaxPool2d(2, stride=2)

        ch = self.num_feats * block.expansion
        hg, res, fc, score, fc_, score_ = [], [], [], [], [], []
        for i in range(num_stacks):
            hg.append(Hourglass(block, num_blocks, self.num_feats, depth))
            res.append(self._make_residual(block, self.num_feats, num_blocks))
            fc.append(self._make_fc(ch, ch))
            score.append(nn.Conv2d(ch, num_classes, kernel_size=1, bias=True))
            if i < num_stacks - 1:
                fc_.append(nn.Conv2d(ch, ch, kernel_size=1, bias=True))
                score_.append(nn.Conv2d(num_classes, ch, kernel_size=1, bias=True))
        self.hg = nn.ModuleList(hg)
        self.res = nn.ModuleList(res)
        self.fc = nn.ModuleList(fc)
        self.score = nn.ModuleList(score)
        self.fc_ = nn.ModuleList(fc_)
        self.score_ = nn.ModuleList(score_)

    def _make_residual(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=True))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def _make_fc(self, inplanes, outplanes):
        bn = nn.BatchNorm2d(inplanes)
        conv = nn.Conv2d(inplanes, outplanes, kernel_size=1, bias=True)
        return nn.Sequential(conv, bn, self.relu)

    def forward(self, x):
        out = []
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        x = self.maxpool(x)
        x = self.layer2(x)
        x = self.layer3(x)
        for i in range(self.num_stacks):
            y = self.hg[i](x)
            y = self.res[i](y)
            y = self.fc[i](y)
            score = self.score[i](y)
            out.append(score)
            if i < self.num_stacks - 1:
                x = x + self.fc_[i](y) + self.score_[i](score)
        return out


# ------------------------------------------------------------------------------------------------ losses


class JointsMSELoss(nn.Module):
    def __init__(self, use_target_weight):
        super().__init__()
        self.criterion = nn.MSELoss(reduction="mean")
        self.use_target_weight = use_target_weight

    def forward(self, output, target, target_weight):
        batch_size = output.size(0)
        num_joints = output.size(1)
        heatmaps_pred = output.reshape((batch_size, num_joints, -1)).split(1, 1)
        heatmaps_gt = target.reshape((batch_size, num_joints, -1)).split(1, 1)
        loss = 0
        for idx in range(num_joints):
            heatmap_pred = heatmaps_pred[idx].squeeze()
            heatmap_gt = heatmaps_gt[idx].squeeze()
            if self.use_target_weight:
                loss += 0.5 * self.criterion(heatmap_pred.mul(target_weight[:, idx]),
                                             heatmap_gt.mul(target_weight[:, idx]))
            else:
                loss += 0.5 * self.criterion(heatmap_pred, heatmap_gt)
        return loss / num_joints


class JointsOHKMMSELoss(nn.Module):
    """Online hard keypoint mining: per sample, the mean of the ``topk`` largest per-joint losses."""

    def __init__(self, use_target_weight, topk=3):
        super().__init__()
        self.criterion = nn.MSELoss(reduction="none")
        self.use_target_weight = use_target_weight
        self.topk = topk

    def ohkm(self, loss):
        ohkm_loss = 0.
        for i in range(loss.size()[0]):
            sub_loss = loss[i]
            topk_val, topk_idx = torch.topk(sub_loss, k=self.topk, dim=0, sorted=False)
            tmp_loss = torch.gather(sub_loss, 0, topk_idx)
            ohkm_loss += torch.sum(tmp_loss) / self.topk
        ohkm_loss /= loss.size()[0]
        return ohkm_loss

    def forward(self, output, target, target_weight):
        batch_size = output.size(0)
        num_joints = output.size(1)
        heatmaps_pred = output.reshape((batch_size, num_joints, -1)).split(1, 1)
        heatmaps_gt = target.reshape((batch_size, num_joints, -1)).split(1, 1)
        loss = []
        for idx in range(num_joints):
            heatmap_pred = heatmaps_pred[idx].squeeze()
            heatmap_gt = heatmaps_gt[idx].squeeze()
            if self.use_target_weight:
                loss.append(0.5 * self.criterion(heatmap_pred.mul(target_weight[:, idx]),
                                                 heatmap_gt.mul(target_weight[:, idx])))
            else:
                loss.append(0.5 * self.criterion(heatmap_pred, heatmap_gt))
        loss = [l.mean(dim=1).unsqueeze(dim=1) for l in loss]
        loss = torch.cat(loss, dim=1)
        return self.ohkm(loss)


def softmax_integral(heatmaps, beta):
    """Soft-argmax: the expected (x, y) of each joint in heatmap pixels, (B, K, 2)."""
    B, K, H, W = heatmaps.shape
    probs = F.softmax(heatmaps.view(B, K, -1) * beta, dim=2)
    probs = probs.view(B, K, H, W)
    xs = torch.arange(W, dtype=torch.float32, device=heatmaps.device)
    ys = torch.linspace(0, H - 1, steps=H, device=heatmaps.device)
    x = (probs.sum(dim=2) * xs).sum(dim=2)
    y = (probs.sum(dim=3) * ys.view(1, 1, -1)).sum(dim=-1)
    return torch.stack((x, y), dim=2)


class IntegralL1Loss(nn.Module):
    """L1 between the soft-argmax and the ground-truth joints, both normalized to [-0.5, 0.5]."""

    def __init__(self, beta):
        super().__init__()
        self.beta = beta

    def forward(self, output, joints, target_weight):
        width = output.shape[-1]
        coords = softmax_integral(output, self.beta) / width - 0.5
        gt = joints / (IMAGE_SIZE / width) / width - 0.5
        return F.l1_loss(coords * target_weight, gt * target_weight)


# ------------------------------------------------------------------------------------------------ predictions


def get_max_preds(batch_heatmaps, floor="div"):
    """The argmax of each heatmap as (x, y), (B, K, 2), zeroed where the maximum is not positive; and the maxima."""
    batch_size, num_joints, _, width = batch_heatmaps.shape
    heatmaps_reshaped = batch_heatmaps.reshape((batch_size, num_joints, -1))
    maxvals, idx = torch.max(heatmaps_reshaped, 2)
    maxvals = maxvals.unsqueeze(2)
    idx = idx.unsqueeze(2)
    preds = idx.repeat(1, 1, 2).float()
    preds[:, :, 0] = preds[:, :, 0] % width
    if floor == "div":
        preds[:, :, 1] = torch.div(idx[:, :, 0], width, rounding_mode="floor")
    else:
        preds[:, :, 1] = torch.floor(preds[:, :, 1] / width)
    pred_mask = maxvals.gt(0.0).repeat(1, 1, 2).float()
    preds *= pred_mask
    return preds, maxvals


def get_max_preds_np(batch_heatmaps):
    batch_size, num_joints, _, width = batch_heatmaps.shape
    heatmaps_reshaped = batch_heatmaps.reshape((batch_size, num_joints, -1))
    idx = np.argmax(heatmaps_reshaped, 2).reshape((batch_size, num_joints, 1))
    maxvals = np.amax(heatmaps_reshaped, 2).reshape((batch_size, num_joints, 1))
    preds = np.tile(idx, (1, 1, 2)).astype(np.float32)
    preds[:, :, 0] = (preds[:, :, 0]) % width
    preds[:, :, 1] = np.floor((preds[:, :, 1]) / width)
    pred_mask = np.tile(np.greater(maxvals, 0.0), (1, 1, 2)).astype(np.float32)
    return preds * pred_mask, maxvals


def get_final_preds(batch_heatmaps):
    """The NumPy argmax moved a quarter pixel toward the larger neighbour, as tensors."""
    coords, maxvals = get_max_preds_np(batch_heatmaps.detach().cpu().numpy())
    coords = torch.from_numpy(coords).to(batch_heatmaps.device)
    heatmap_height, heatmap_width = batch_heatmaps.shape[2], batch_heatmaps.shape[3]
    for n in range(coords.shape[0]):
        for p in range(coords.shape[1]):
            hm = batch_heatmaps[n][p]
            px = int(math.floor(coords[n][p][0] + 0.5))
            py = int(math.floor(coords[n][p][1] + 0.5))
            if 1 < px < heatmap_width - 1 and 1 < py < heatmap_height - 1:
                diff = torch.stack([hm[py][px + 1] - hm[py][px - 1], hm[py + 1][px] - hm[py - 1][px]])
                coords[n][p] += torch.sign(diff) * .25
    return coords, maxvals


def flip_back(output_flipped, flip_pairs, how="assign"):
    """Heatmaps of a mirrored image mirrored back, left and right joints swapped."""
    output_flipped = torch.flip(output_flipped, [3])
    if how == "index_select":
        perm = list(range(output_flipped.size(1)))
        for a, b in flip_pairs:
            perm[a], perm[b] = b, a
        return output_flipped.index_select(1, torch.tensor(perm, device=output_flipped.device))
    output_flipped = output_flipped.clone()
    for pair in flip_pairs:
        output_flipped[:, [pair[0], pair[1]], :, :] = output_flipped[:, [pair[1], pair[0]], :, :]
    return output_flipped


def pck(preds, joints, visible, norm, thr=0.5, dist_fn=torch.linalg.norm):
    """The fraction of visible joints predicted within ``thr * norm`` pixels, overall and per joint."""
    dists = dist_fn((preds - joints) / norm, dim=-1)
    dists = torch.where(visible > 0.5, dists, torch.full_like(dists, -1.0))
    per_joint = []
    for k in range(dists.shape[1]):
        d = dists[:, k]
        d = d[d.ne(-1)]
        per_joint.append(d.lt(thr).float().mean().item() if d.numel() > 0 else -1)
    valid = dists.ne(-1)
    overall = (dists.lt(thr) & valid).sum().item() / max(valid.sum().item(), 1)
    return overall, per_joint


class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count if self.count != 0 else 0


# ------------------------------------------------------------------------------------------------ training


def compute_loss(criterion, outputs, target, target_weight, joints, args):
    if args.loss == "integral":
        return sum(criterion(o, joints, target_weight) for o in outputs)
    loss = criterion(outputs[0], target, target_weight)
    for output in outputs[1:]:  # intermediate supervision
        loss += criterion(output, target, target_weight)
    return loss


def predict(model, images, args):
    """The heatmaps of ``images`` averaged with those of their mirror images (the flip test), as the last stack
    gives them."""
    output = model(images)
    output = output[-1] if isinstance(output, list) else output
    if args.flip_test:
        outputs_flipped = model(torch.flip(images, [3]))
        output_flipped = outputs_flipped[-1] if isinstance(outputs_flipped, list) else outputs_flipped
        output_flipped = flip_back(output_flipped, FLIP_PAIRS, args.flip_back)
        if args.shift_heatmap:
            output_flipped[:, :, :, 1:] = output_flipped.clone()[:, :, :, 0:-1]
        output = (output + output_flipped) * 0.5
    return output


def validate(model, loader, args, device):
    model.eval()
    acc = AverageMeter()
    with torch.no_grad():
        for images, target, target_weight, meta in loader:
            images = images.to(device)
            output = predict(model, images, args)
            stride = IMAGE_SIZE / output.shape[-1]
            if args.loss == "integral":
                preds = softmax_integral(output, args.beta) * stride
            else:
                preds, _ = get_final_preds(output)
                preds = preds * stride
            joints, visible = meta["joints"].to(device), meta["joints_vis"].to(device)
            avg_acc, _ = pck(preds, joints, visible, norm=torch.tensor([IMAGE_SIZE / 10.0] * 2, device=device))
            acc.update(avg_acc, images.size(0))
    return acc.avg


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=("simple", "hourglass"), default="simple")
    p.add_argument("--loss", choices=("mse", "ohkm", "integral"), default="mse")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--train-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--lr-step", type=float, nargs="+", default=(0.7, 0.9), help="milestones, as fractions of steps")
    p.add_argument("--beta", type=float, default=4.0, help="the soft-argmax's inverse temperature")
    p.add_argument("--no-target-weight", dest="use_target_weight", action="store_false")
    p.add_argument("--floor", choices=("div", "floor"), default="div", help="get_max_preds' row by torch.div or "
                   "torch.floor")
    p.add_argument("--flip-back", choices=("assign", "index_select"), default="assign")
    p.add_argument("--no-flip-test", dest="flip_test", action="store_false")
    p.add_argument("--no-shift-heatmap", dest="shift_heatmap", action="store_false")
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.arch == "simple":
        model = PoseResNet(len(JOINTS))
        model.init_weights()
    else:
        model = HourglassNet(Bottleneck, num_stacks=2, num_blocks=1, num_classes=len(JOINTS))
    model = model.to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    heatmap_size = 16 if args.arch == "simple" else 8

    train_dataset = FigureDataset(args.train_size, heatmap_size, args.seed)
    valid_dataset = FigureDataset(32, heatmap_size, args.seed + 1, train=False)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=not args.no_shuffle, drop_last=True)
    valid_loader = DataLoader(valid_dataset, batch_size=32, shuffle=False)

    if args.loss == "mse":
        criterion = JointsMSELoss(use_target_weight=args.use_target_weight).to(device)
    elif args.loss == "ohkm":
        criterion = JointsOHKMMSELoss(use_target_weight=args.use_target_weight).to(device)
    else:
        criterion = IntegralL1Loss(args.beta)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    lr_scheduler = MultiStepLR(optimizer, milestones=[int(f * args.steps) for f in args.lr_step], gamma=0.1)

    losses_meter, acc_meter = AverageMeter(), AverageMeter()
    losses = []
    step = 0
    while step < args.steps:
        model.train()
        for images, target, target_weight, meta in train_loader:
            images = images.to(device)
            target = target.to(device, non_blocking=True)
            target_weight = target_weight.to(device, non_blocking=True)
            joints = meta["joints"].to(device)
            outputs = model(images)
            outputs = outputs if isinstance(outputs, list) else [outputs]
            loss = compute_loss(criterion, outputs, target, target_weight, joints, args)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            lr_scheduler.step()

            losses_meter.update(loss.item(), images.size(0))
            preds, _ = get_max_preds(outputs[-1].detach(), args.floor)
            gt, _ = get_max_preds(target, args.floor)
            avg_acc, _ = pck(preds, gt, target_weight.squeeze(2), norm=torch.ones(2, device=device) * heatmap_size / 10,
                             dist_fn=torch.norm)
            acc_meter.update(avg_acc, images.size(0))
            losses.append(loss.item())
            step += 1
            if step == args.steps:
                break
    print(f"{args.arch}/{args.loss}: loss {losses_meter.avg:.5f}, train accuracy {acc_meter.avg:.3f}, "
          f"PCK@0.5 {validate(model, valid_loader, args, device):.3f}, lr {optimizer.param_groups[0]['lr']:.2e}")
    return losses


if __name__ == "__main__":
    print(main())
