"""Image classifiers in the shapes model zoos publish, shrunk to tiny widths: a ResNet-50 style network of
Bottleneck blocks (expansion 4, a ``downsample`` Sequential, a 7x7/2 stem and a 3x3/2 max-pool, Kaiming fan-out
init over ``self.modules()``, ``zero_init_residual``) and its grouped ResNeXt sibling; MobileNetV2 inverted
residuals (``_make_divisible`` widths, depthwise convolutions, ``ReLU6(inplace=True)``, a Dropout + Linear head
initialised ``normal_(0, 0.01)``); MobileNetV3 / EfficientNet blocks with squeeze-and-excitation (Hardswish and
Hardsigmoid, or SiLU and Sigmoid) and stochastic depth written by hand; a DenseNet of dense layers concatenating
every earlier feature map (optionally through checkpointed bottlenecks) and BN-ReLU-Conv1x1-AvgPool
transitions. Trained with label smoothing, nesterov SGD without weight decay on norms and biases, a per-batch LR
schedule (OneCycleLR, or LinearLR warm-up then cosine through SequentialLR), and evaluated under ``model.eval()``
with top-1 / top-5 accuracy. Synthetic data, no downloads. Only the imports name the framework.

    python zoo_classifiers.py --arch resnet50 --steps 10

``main`` returns the training loss of every step."""
import argparse
from collections import OrderedDict

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, OneCycleLR, SequentialLR

ARCHS = ("resnet50", "resnext", "mobilenetv2", "mobilenetv3", "efficientnet", "densenet")


# ------------------------------------------------------------------------------------------------ ResNet-50


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation, groups=groups,
                     bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10, zero_init_residual=True, groups=1, width_per_group=64,
                 base=8):
        super().__init__()
        self._norm_layer = nn.BatchNorm2d
        self.inplanes = base
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = self._norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, base, layers[0])
        self.layer2 = self._make_layer(block, base * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, base * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, base * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(base * 8 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        norm_layer = self._norm_layer
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)

    def forward(self, x):
        return self._forward_impl(x)


# ------------------------------------------------------------------------------------------------ MobileNets


def _make_divisible(v, divisor, min_value=None):
    """``v`` rounded to a multiple of ``divisor``, never more than 10 % below ``v``."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def drop_path(x, drop_prob=0.0, training=False):
    """Stochastic depth: each sample's residual branch is dropped with probability ``drop_prob``."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep_prob)
    random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)

    def extra_repr(self):
        return f"drop_prob={round(self.drop_prob, 3):0.3f}"


class ConvBNActivation(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, groups=1, activation_layer=nn.ReLU6):
        padding = (kernel_size - 1) // 2
        layers = [nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups, bias=False),
                  nn.BatchNorm2d(out_planes, eps=1e-3 if activation_layer is nn.SiLU else 1e-5)]
        if activation_layer is not None:
            layers.append(activation_layer(inplace=True))
        super().__init__(*layers)
        self.out_channels = out_planes


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        self.stride = stride
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNActivation(inp, hidden_dim, kernel_size=1))
        layers.extend([
            ConvBNActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),  # depthwise
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ])
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=10, width_mult=0.25, round_nearest=8, dropout=0.2):
        super().__init__()
        input_channel = _make_divisible(32 * width_mult, round_nearest)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult) / 8, round_nearest)
        # t (expansion), c (channels), n (repeats), s (first stride): the published table, cut short
        inverted_residual_setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2], [6, 64, 1, 2]]
        features = [ConvBNActivation(3, input_channel, stride=2)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(InvertedResidual(input_channel, output_channel, stride, expand_ratio=t))
                input_channel = output_channel
        features.append(ConvBNActivation(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)


class SqueezeExcitation(nn.Module):
    def __init__(self, input_channels, squeeze_channels, activation=nn.ReLU, scale_activation=nn.Sigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def _scale(self, x):
        scale = self.avgpool(x)
        scale = self.activation(self.fc1(scale))
        return self.scale_activation(self.fc2(scale))

    def forward(self, x):
        return self._scale(x) * x


class MBConv(nn.Module):
    """MobileNetV3's bneck and EfficientNet's MBConv: expand, depthwise, squeeze-and-excite, project."""

    def __init__(self, cin, kernel, expanded, cout, use_se, activation, stride, drop_prob, se_style):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        layers = []
        if expanded != cin:
            layers.append(ConvBNActivation(cin, expanded, kernel_size=1, activation_layer=activation))
        layers.append(ConvBNActivation(expanded, expanded, kernel_size=kernel, stride=stride, groups=expanded,
                                       activation_layer=activation))
        if use_se and se_style == "v3":
            squeeze = _make_divisible(expanded // 4, 8)
            layers.append(SqueezeExcitation(expanded, squeeze, scale_activation=nn.Hardsigmoid))
        elif use_se:
            layers.append(SqueezeExcitation(expanded, max(1, cin // 4), activation=nn.SiLU))
        layers.append(ConvBNActivation(expanded, cout, kernel_size=1, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = DropPath(drop_prob)

    def forward(self, x):
        result = self.block(x)
        if self.use_res_connect:
            result = self.stochastic_depth(result)
            result += x
        return result


class MBNet(nn.Module):
    """MobileNetV3-small-like (``se_style='v3'``) or EfficientNet-B0-like (``'efficientnet'``), in miniature."""

    def __init__(self, se_style, num_classes=10, dropout=0.2, drop_path_rate=0.1):
        super().__init__()
        v3 = se_style == "v3"
        HS, RE = nn.Hardswish, nn.ReLU
        act = (lambda name: HS if name == "HS" else RE) if v3 else (lambda name: nn.SiLU)
        # kernel, expanded, out, SE, activation, stride
        setting = [(3, 16, 16, True, "RE", 2), (3, 24, 16, False, "RE", 1), (5, 32, 24, True, "HS", 2),
                   (5, 48, 24, True, "HS", 1), (3, 64, 32, True, "HS", 2)]
        first = 8
        layers = [ConvBNActivation(3, first, stride=2, activation_layer=HS if v3 else nn.SiLU)]
        cin = first
        for i, (k, exp, cout, se, name, s) in enumerate(setting):
            layers.append(MBConv(cin, k, exp, cout, se, act(name), s, drop_path_rate * i / len(setting), se_style))
            cin = cout
        last = 6 * cin
        layers.append(ConvBNActivation(cin, last, kernel_size=1, activation_layer=HS if v3 else nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        if v3:
            self.classifier = nn.Sequential(nn.Linear(last, 64), nn.Hardswish(inplace=True),
                                            nn.Dropout(p=dropout, inplace=True), nn.Linear(64, num_classes))
        else:
            self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(last, num_classes))

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                init_range = 1.0 / m.out_features ** 0.5
                nn.init.uniform_(m.weight, -init_range, init_range)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


# ------------------------------------------------------------------------------------------------ DenseNet


class _DenseLayer(nn.Module):
    def __init__(self, num_input_features, growth_rate, bn_size, drop_rate, memory_efficient=False):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient

    def bn_function(self, inputs):
        concated_features = torch.cat(inputs, 1)
        return self.conv1(self.relu1(self.norm1(concated_features)))

    def any_requires_grad(self, input):
        for tensor in input:
            if tensor.requires_grad:
                return True
        return False

    @torch.jit.unused
    def call_checkpoint_bottleneck(self, input):
        def closure(*inputs):
            return self.bn_function(inputs)
        return cp.checkpoint(closure, *input, use_reentrant=False)

    def forward(self, input):
        prev_features = [input] if isinstance(input, torch.Tensor) else input
        if self.memory_efficient and self.any_requires_grad(prev_features):
            if torch.jit.is_scripting():
                raise Exception("Memory Efficient not supported in JIT")
            bottleneck_output = self.call_checkpoint_bottleneck(prev_features)
        else:
            bottleneck_output = self.bn_function(prev_features)
        new_features = self.conv2(self.relu2(self.norm2(bottleneck_output)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(nn.ModuleDict):
    def __init__(self, num_layers, num_input_features, bn_size, growth_rate, drop_rate, memory_efficient=False):
        super().__init__()
        for i in range(num_layers):
            layer = _DenseLayer(num_input_features + i * growth_rate, growth_rate, bn_size, drop_rate,
                                memory_efficient)
            self.add_module("denselayer%d" % (i + 1), layer)

    def forward(self, init_features):
        features = [init_features]
        for name, layer in self.items():
            new_features = layer(features)
            features.append(new_features)
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    def __init__(self, growth_rate=4, block_config=(2, 3, 2), num_init_features=8, bn_size=2, drop_rate=0.0,
                 num_classes=10, memory_efficient=False):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
        ]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            block = _DenseBlock(num_layers, num_features, bn_size, growth_rate, drop_rate, memory_efficient)
            self.features.add_module("denseblock%d" % (i + 1), block)
            num_features = num_features + num_layers * growth_rate
            if i != len(block_config) - 1:
                trans = _Transition(num_features, num_features // 2)
                self.features.add_module("transition%d" % (i + 1), trans)
                num_features = num_features // 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        features = self.features(x)
        out = F.relu(features, inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        out = torch.flatten(out, 1)
        return self.classifier(out)


def build(arch, dropout, drop_path_rate, memory_efficient=False):
    if arch == "resnet50":
        return ResNet(Bottleneck, [2, 1, 1, 1])
    if arch == "resnext":
        return ResNet(Bottleneck, [1, 1, 1, 1], groups=4, width_per_group=32)
    if arch == "mobilenetv2":
        return MobileNetV2(dropout=dropout)
    if arch == "mobilenetv3":
        return MBNet("v3", dropout=dropout, drop_path_rate=drop_path_rate)
    if arch == "efficientnet":
        return MBNet("efficientnet", dropout=dropout, drop_path_rate=drop_path_rate)
    return DenseNet(drop_rate=dropout / 2, memory_efficient=memory_efficient)


# ------------------------------------------------------------------------------------------------ training


def synthetic_images(n, size, num_classes=10, seed=0):
    """``n`` normalised float32 images (N, 3, size, size) of ``num_classes`` smooth patterns plus noise."""
    rs = np.random.RandomState(seed)
    grid = np.linspace(0, 2 * np.pi, size)
    protos = np.stack([np.cos(np.add.outer((c % 4 + 1) * grid, (c // 4 + 1) * grid))[None]
                       * rs.uniform(0.5, 1.5, (3, 1, 1)) for c in range(num_classes)])
    labels = rs.randint(0, num_classes, n)
    images = protos[labels] + 0.5 * rs.randn(n, 3, size, size)
    return images.astype(np.float32), labels.astype(np.int64)


def accuracy(output, target, topk=(1,)):
    """The top-k accuracies (percent) of ``output`` for each k in ``topk``."""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def set_weight_decay(model, weight_decay, norm_weight_decay=0.0):
    """Two parameter groups: weight decay for conv and linear weights, ``norm_weight_decay`` for norms and
    biases."""
    norm_classes = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)
    params = {"other": [], "norm": []}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            params["norm" if isinstance(module, norm_classes) or name == "bias" else "other"].append(p)
    return [{"params": params["other"], "weight_decay": weight_decay},
            {"params": params["norm"], "weight_decay": norm_weight_decay}]


def make_scheduler(name, optimizer, steps, lr):
    if name == "onecycle":
        return OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.3)
    warmup = max(1, steps // 4)
    return SequentialLR(optimizer, [LinearLR(optimizer, start_factor=0.1, total_iters=warmup),
                                    CosineAnnealingLR(optimizer, T_max=steps - warmup, eta_min=lr * 0.01)],
                        milestones=[warmup])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=ARCHS, default="resnet50")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--train-size", type=int, default=16, help="images cycled through in order")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--scheduler", choices=("onecycle", "cosine"), default="cosine")
    p.add_argument("--dropout", type=float, default=0.0, help="the classifiers' dropout (0 for parity runs)")
    p.add_argument("--drop-path", type=float, default=0.0, help="stochastic depth rate (0 for parity runs)")
    p.add_argument("--memory-efficient", action="store_true", help="DenseNet: checkpointed bottlenecks")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = build(args.arch, args.dropout, args.drop_path, args.memory_efficient).to(device)
    model = model.to(memory_format=memory_format)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.SGD(set_weight_decay(model, args.weight_decay), lr=args.lr, momentum=0.9,
                                nesterov=True)
    scheduler = make_scheduler(args.scheduler, optimizer, args.steps, args.lr)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    images, labels = synthetic_images(args.train_size, args.image_size, seed=args.seed)
    images = torch.from_numpy(images).to(device).contiguous(memory_format=memory_format)
    labels = torch.from_numpy(labels).to(device)
    batches = args.train_size // args.batch_size
    losses = []
    model.train()
    for step in range(args.steps):
        start = step % batches * args.batch_size
        image, target = images[start:start + args.batch_size], labels[start:start + args.batch_size]
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.append(loss.item())
    model.eval()
    with torch.inference_mode():
        output = model(images)
        acc1, acc5 = accuracy(output, labels, topk=(1, 5))
        eval_loss = F.cross_entropy(output, labels).item()
    print(f"{args.arch}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, eval loss {eval_loss:.4f} "
          f"acc@1 {acc1.item():.1f} acc@5 {acc5.item():.1f}, lr {scheduler.get_last_lr()[0]:.5f}")
    return losses


if __name__ == "__main__":
    print(main())
