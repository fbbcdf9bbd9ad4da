"""Sine-wave prediction with two ``nn.LSTMCell``s unrolled by hand, as a PyTorch user writes it: the model in
double precision (``model.double()``, data from ``torch.from_numpy`` of float64 arrays), the sequence cut into
time steps with ``input.split(1, dim=1)``, L-BFGS steps through a ``closure`` that clears the gradients,
computes the MSE loss, calls ``backward`` and returns the loss; after each step the model is asked to continue
the waves ``future`` steps past their end under ``torch.no_grad()``. Only the imports name the framework.

``main`` returns, for every step, the training loss that ``optimizer.step(closure)`` reports."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        batch = input.size(0)
        h_t = torch.zeros(batch, self.hidden, dtype=torch.double, device=input.device)
        c_t = torch.zeros(batch, self.hidden, dtype=torch.double, device=input.device)
        h_t2 = torch.zeros(batch, self.hidden, dtype=torch.double, device=input.device)
        c_t2 = torch.zeros(batch, self.hidden, dtype=torch.double, device=input.device)
        output = None
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):  # feed the model its own predictions
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.stack(outputs, 1).squeeze(2)


def sine_waves(rng, count, length, period=20.0):
    """``count`` sine waves of ``length`` samples, each starting at a random phase."""
    shift = rng.integers(-4 * int(period), 4 * int(period), size=(count, 1))
    t = np.arange(length)[None, :] + shift
    return np.sin(t / period).astype(np.float64)


def parse_args(argv):
    p = argparse.ArgumentParser(description="two LSTMCells predict sine waves, trained with L-BFGS")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--waves", type=int, default=12)
    p.add_argument("--length", type=int, default=40)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--max-iter", type=int, default=20, help="L-BFGS iterations in one step")
    p.add_argument("--line-search", default=None, choices=["strong_wolfe"])
    p.add_argument("--future", type=int, default=20)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    """Train; ``init(name, params)``, if given, may set the model's initial parameters in place."""
    args = parse_args(argv)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    data = sine_waves(np.random.default_rng(args.seed), args.waves, args.length)
    held_out = 3
    input = torch.from_numpy(data[held_out:, :-1]).to(device)
    target = torch.from_numpy(data[held_out:, 1:]).to(device)
    test_input = torch.from_numpy(data[:held_out, :-1]).to(device)
    test_target = torch.from_numpy(data[:held_out, 1:]).to(device)

    seq = Sequence(args.hidden)
    seq.double()
    seq.to(device)
    if init is not None:
        init("model", dict(seq.named_parameters()))
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=args.max_iter, line_search_fn=args.line_search)
    losses = []
    for step in range(args.steps):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            loss.backward()
            return loss
        loss = optimizer.step(closure)
        losses.append(loss.item())
        with torch.no_grad():
            pred = seq(test_input, future=args.future)
            test_loss = criterion(pred[:, :test_target.size(1)], test_target)
        forecast = pred.detach().cpu().numpy()
        assert forecast.shape == (held_out, args.length - 1 + args.future), forecast.shape
        print(f"step {step}: loss {losses[-1]:.6f}, test loss {test_loss.item():.6f}")
    return losses


if __name__ == "__main__":
    main()
