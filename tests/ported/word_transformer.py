"""A Transformer language model, written as a PyTorch user writes one: token embeddings scaled by sqrt(d),
sinusoidal positions kept in a buffer, ``nn.TransformerEncoder`` layers under a causal mask from
``nn.Transformer.generate_square_subsequent_mask``, a Linear decoder; trained with SGD and gradient
clipping on a synthetic corpus (noisy counting sequences, so that the next token is learnable). Only the
imports name the framework.

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=512):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1).float()
        scale = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, 1, d_model)
        table[:, 0, 0::2] = torch.sin(position * scale)
        table[:, 0, 1::2] = torch.cos(position * scale)
        self.register_buffer("pe", table)

    def forward(self, x):  # (seq, batch, d_model)
        return self.dropout(x + self.pe[:x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        self.init_weights()

    def init_weights(self):
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.zeros_(self.linear.bias)
        nn.init.uniform_(self.linear.weight, -0.1, 0.1)

    def forward(self, src, src_mask):
        src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        return self.linear(self.transformer_encoder(src, src_mask, is_causal=True))


def corpus(rng, length, ntoken):
    """Counting modulo ntoken, restarting at a random token now and then: mostly predictable."""
    out, value = np.empty(length, np.int64), 0
    for i in range(length):
        value = int(rng.integers(ntoken)) if rng.random() < 0.1 else (value + 1) % ntoken
        out[i] = value
    return out


def batchify(data, bsz, device):
    """(len // bsz, bsz): column b is the b-th contiguous slice of the corpus."""
    seq_len = data.size(0) // bsz
    return data[:seq_len * bsz].view(bsz, seq_len).t().contiguous().to(device)


def parse_args(argv):
    p = argparse.ArgumentParser(description="a Transformer language model on a synthetic corpus")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--bptt", type=int, default=16, help="sequence length of a step")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--ntoken", type=int, default=20)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    """Train; ``init(name, params)``, if given, may set the model's initial parameters in place."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)
    data = batchify(torch.from_numpy(corpus(rng, 4096, args.ntoken)), args.batch_size, device)
    model = TransformerModel(args.ntoken, 32, 2, 64, 2, args.dropout).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    mask = nn.Transformer.generate_square_subsequent_mask(args.bptt).to(device)
    model.train()
    losses = []
    for step in range(args.steps):
        i = (step * args.bptt) % (data.size(0) - args.bptt - 1)
        src, target = data[i:i + args.bptt], data[i + 1:i + 1 + args.bptt].reshape(-1)
        output = model(src, mask)
        loss = F.cross_entropy(output.view(-1, args.ntoken), target)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        losses.append(loss.item())
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses)} steps")
    return losses


if __name__ == "__main__":
    main()
