"""A spatial transformer network on MNIST, written as a PyTorch user writes one: a small localization
convnet regresses a 2x3 affine matrix (its last layer starts at the identity), ``F.affine_grid`` and
``F.grid_sample`` resample the input through it, and a classic convnet classifies the result; SGD with
momentum. Only the imports name the framework.

    python stn.py --steps 100                     # learnable stand-in digits
    python stn.py --data-dir ../../../shared/data # the real MNIST IDX files

``main`` returns the training losses, one per step."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

from mnist_data import mnist


class Net(nn.Module):
    def __init__(self, dropout=True):
        super().__init__()
        self.dropout = dropout
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(0.5 if dropout else 0.0)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
        # the transformer starts as the identity map
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        xs = self.localization(x).view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training and self.dropout)
        return F.log_softmax(self.fc2(x), dim=1)


def to_dataset(images, labels):
    x = (torch.from_numpy(images).unsqueeze(1) - 0.1307) / 0.3081
    return TensorDataset(x, torch.from_numpy(labels))


def parse_args(argv):
    parser = argparse.ArgumentParser(description="MNIST spatial transformer network",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64, help="training batch size")
    parser.add_argument("--steps", type=int, default=0, help="at most this many batches (0: one epoch)")
    parser.add_argument("--lr", type=float, default=0.01, help="SGD learning rate")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--data-dir", default=None, help="folder with the MNIST IDX files (default: stand-ins)")
    parser.add_argument("--train-size", type=int, default=2048, help="training images (stand-ins or a subset)")
    parser.add_argument("--no-dropout", action="store_true", help="dropout probability 0 (deterministic steps)")
    parser.add_argument("--no-shuffle", action="store_true", help="batches in dataset order")
    return parser.parse_args(argv)


def main(argv=None, init=None):
    """Train; ``init(name, params)``, if given, may set the initial parameters in place."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    x_train, y_train, _, _ = mnist(args.data_dir, args.train_size, 16, args.seed)
    loader = DataLoader(to_dataset(x_train, y_train), batch_size=args.batch_size, shuffle=not args.no_shuffle)
    model = Net(dropout=not args.no_dropout).to(device)
    if init is not None:
        init("net", dict(model.named_parameters()))
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    model.train()
    losses = []
    for batch_idx, (data, target) in enumerate(loader):
        if args.steps and batch_idx >= args.steps:
            break
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    main()
