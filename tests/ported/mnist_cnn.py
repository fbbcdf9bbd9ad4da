"""The classic MNIST convnet, written as a PyTorch user writes it: two convolutions, max-pooling, dropout,
two fully connected layers, log-softmax with the negative log-likelihood, Adadelta and a step decay of the
learning rate. Only the imports name the framework.

    python mnist_cnn.py --epochs 1 --steps 100             # learnable stand-in digits
    python mnist_cnn.py --data-dir ../../../shared/data    # the real MNIST IDX files

``main`` returns the training losses, one per step."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

from mnist_data import mnist


class Net(nn.Module):
    def __init__(self, dropout=True):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25 if dropout else 0.0)
        self.dropout2 = nn.Dropout(0.5 if dropout else 0.0)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def to_dataset(images, labels):
    """NumPy images in [0, 1] as normalized (N, 1, 28, 28) tensors with their labels."""
    x = (torch.from_numpy(images).unsqueeze(1) - 0.1307) / 0.3081
    return TensorDataset(x, torch.from_numpy(labels))


def train(args, model, device, loader, optimizer, epoch, losses):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        if args.steps and batch_idx >= args.steps:
            break
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}]\tLoss: {losses[-1]:.6f}")


def test(model, device, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    n = len(loader.dataset)
    print(f"Test set: Average loss: {test_loss / n:.4f}, Accuracy: {correct}/{n} ({100.0 * correct / n:.0f}%)")
    return correct / n


def parse_args(argv):
    parser = argparse.ArgumentParser(description="MNIST convnet",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64, help="training batch size")
    parser.add_argument("--test-batch-size", type=int, default=1000, help="test batch size")
    parser.add_argument("--epochs", type=int, default=1, help="epochs to train")
    parser.add_argument("--steps", type=int, default=0, help="at most this many batches per epoch (0: all)")
    parser.add_argument("--lr", type=float, default=1.0, help="Adadelta learning rate")
    parser.add_argument("--gamma", type=float, default=0.7, help="learning-rate decay per epoch")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--data-dir", default=None, help="folder with the MNIST IDX files (default: stand-ins)")
    parser.add_argument("--train-size", type=int, default=2048, help="training images (stand-ins or a subset)")
    parser.add_argument("--test-size", type=int, default=512, help="test images")
    parser.add_argument("--no-dropout", action="store_true", help="dropout probability 0 (deterministic steps)")
    parser.add_argument("--no-shuffle", action="store_true", help="batches in dataset order")
    parser.add_argument("--log-interval", type=int, default=10, help="batches between log lines")
    parser.add_argument("--save-model", default=None, help="write the trained state_dict to this file")
    return parser.parse_args(argv)


def main(argv=None, init=None):
    """Train and test; ``init(name, params)``, if given, may set the initial parameters in place."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))

    x_train, y_train, x_test, y_test = mnist(args.data_dir, args.train_size, args.test_size, args.seed)
    train_loader = DataLoader(to_dataset(x_train, y_train), batch_size=args.batch_size,
                              shuffle=not args.no_shuffle)
    test_loader = DataLoader(to_dataset(x_test, y_test), batch_size=args.test_batch_size)

    model = Net(dropout=not args.no_dropout).to(device)
    if init is not None:
        init("net", dict(model.named_parameters()))
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

    losses = []
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch, losses)
        test(model, device, test_loader)
        scheduler.step()
    if args.save_model:
        torch.save(model.state_dict(), args.save_model)
    return losses


if __name__ == "__main__":
    main()
