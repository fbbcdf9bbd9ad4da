"""A recurrent word-level language model, written as a PyTorch user writes one: an embedding, a multi-layer
``nn.LSTM`` (or ``nn.GRU`` / ``nn.RNN`` by a flag) with dropout between its layers, a decoder whose weight is the
embedding's (``self.decoder.weight = self.encoder.weight``), ``log_softmax`` and ``NLLLoss``; the corpus cut into
columns with ``narrow`` and ``view(bsz, -1).t().contiguous()``, the hidden state made by ``weight.new_zeros`` and
cut from the previous batch's graph with ``detach`` (a tuple for the LSTM), gradients clipped with
``clip_grad_norm_`` and applied by hand with ``p.data.add_(p.grad, alpha=-lr)``; perplexity ``math.exp`` of the
validation loss, the learning rate divided by 4 when it stops improving, the best weights kept through
``torch.save`` / ``torch.load`` of the state dict; at the end a few tokens sampled with ``torch.multinomial``,
each fed back with ``input.fill_``. The corpus is a synthetic Markov chain. Only the imports name the framework.

``main`` returns the training loss of every step."""
import argparse
import io
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("tied weights need the hidden size to equal the embedding size")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def markov_corpus(rng, length, ntoken):
    """Tokens of a Markov chain whose transitions favour a few successors of each token."""
    transitions = rng.dirichlet(np.full(ntoken, 0.03), size=ntoken)
    cumulative = np.cumsum(transitions, axis=1)
    tokens = np.empty(length, np.int64)
    tokens[0] = 0
    for i, u in enumerate(rng.random(length - 1), start=1):
        tokens[i] = min(int(np.searchsorted(cumulative[tokens[i - 1]], u)), ntoken - 1)
    return tokens


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)  # the tokens that do not fill a column are dropped
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(h):
    """The hidden state, cut from the graph of the batch that made it."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def evaluate(model, criterion, source, bsz, bptt):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(bsz)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, bptt):
            data, targets = get_batch(source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(source) - 1)


def generate(model, ntoken, words, temperature, device):
    """Sample ``words`` tokens from the model, feeding each back as the next input."""
    model.eval()
    hidden = model.init_hidden(1)
    input = torch.randint(ntoken, (1, 1), dtype=torch.long).to(device)
    sampled = []
    with torch.no_grad():
        for _ in range(words):
            output, hidden = model(input, hidden)
            word_weights = output.squeeze().div(temperature).exp().cpu()
            word_idx = torch.multinomial(word_weights, 1)[0]
            input.fill_(word_idx)
            sampled.append(int(word_idx))
    return sampled


def parse_args(argv):
    p = argparse.ArgumentParser(description="a recurrent language model on a synthetic Markov-chain corpus")
    p.add_argument("--model", default="LSTM", choices=["LSTM", "GRU", "RNN_TANH", "RNN_RELU"])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ntoken", type=int, default=16)
    p.add_argument("--emsize", type=int, default=32)
    p.add_argument("--nhid", type=int, default=32)
    p.add_argument("--nlayers", type=int, default=2)
    p.add_argument("--lr", type=float, default=5.0)
    p.add_argument("--clip", type=float, default=0.25)
    p.add_argument("--bptt", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--no-tied", dest="tied", action="store_false")
    p.add_argument("--train-tokens", type=int, default=2000)
    p.add_argument("--eval-interval", type=int, default=10, help="steps between validation runs")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    """Train; ``init(name, params)``, if given, may set the model's initial parameters in place."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)
    tokens = torch.from_numpy(markov_corpus(rng, args.train_tokens * 3 // 2, args.ntoken))
    split = args.train_tokens
    eval_batch_size = 4
    train_data = batchify(tokens[:split], args.batch_size, device)
    val_data = batchify(tokens[split:], eval_batch_size, device)

    model = RNNModel(args.model, args.ntoken, args.emsize, args.nhid, args.nlayers, args.dropout,
                     args.tied).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    criterion = nn.NLLLoss()
    lr = args.lr
    best_val_loss = None
    best_state = None
    losses = []
    while len(losses) < args.steps:  # epochs
        model.train()
        hidden = model.init_hidden(args.batch_size)
        for i in range(0, train_data.size(0) - 1, args.bptt):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
            if len(losses) % args.eval_interval == 0 or len(losses) == args.steps:
                val_loss = evaluate(model, criterion, val_data, eval_batch_size, args.bptt)
                print(f"step {len(losses)}: lr {lr:g}, train loss {loss.item():.3f}, "
                      f"valid ppl {math.exp(val_loss):.2f}")
                if best_val_loss is None or val_loss < best_val_loss:
                    buffer = io.BytesIO()
                    torch.save(model.state_dict(), buffer)
                    best_state, best_val_loss = buffer.getvalue(), val_loss
                else:
                    lr /= 4.0
                model.train()
            if len(losses) == args.steps:
                break
    model.load_state_dict(torch.load(io.BytesIO(best_state)))
    if args.model in ("LSTM", "GRU"):
        model.rnn.flatten_parameters()  # the weights were replaced: make them one contiguous block again
    final = evaluate(model, criterion, val_data, eval_batch_size, args.bptt)
    assert final == best_val_loss or math.isclose(final, best_val_loss, rel_tol=1e-5), (final, best_val_loss)
    sample = generate(model, args.ntoken, 20, 1.0, device)
    assert all(0 <= w < args.ntoken for w in sample), sample
    print(f"best valid ppl {math.exp(best_val_loss):.2f}; a sample: {' '.join(map(str, sample))}")
    return losses


if __name__ == "__main__":
    main()
