"""Sequence classification as PyTorch users write it, on token sequences of varying lengths (padding index 0)
and on 1-D signals, the model picked by ``--arch``:

- ``bag``: ``nn.EmbeddingBag(mode="mean")`` fed the batch's tokens flat with their offsets (the text-classification
  tutorial's ``collate_fn``: ``torch.tensor(offsets[:-1]).cumsum(dim=0)``), then a ``Linear``; with ``--sparse``
  the bag's ``sparse=True`` gradients go to a ``SparseAdam`` of their own, the rest to the dense optimizer;
- ``lstm``: ``nn.Embedding(padding_idx=0)`` and a bidirectional two-layer ``nn.LSTM(batch_first=True)`` over
  ``pack_padded_sequence(..., lengths.cpu(), batch_first=True, enforce_sorted=False)``, ``pad_packed_sequence``
  back; attention pooling (a ``Linear`` score, the padding ``masked_fill``-ed with ``-inf`` or
  ``torch.finfo(dtype).min`` (``--mask-value``), ``softmax`` over time, the weighted sum by ``torch.bmm`` or
  ``torch.einsum`` (``--attention``)) concatenated with the last layer's final states ``h_n[-2]``, ``h_n[-1]``;
- ``textcnn``: ``nn.Embedding`` (word vectors ``copy_``-ed into its ``weight.data``, the padding row zeroed), then
  ``nn.Conv1d`` s of kernel sizes 3, 4 and 5 over the transposed embeddings, ReLU, max over time
  (``F.max_pool1d(x, x.size(2))`` or ``.max(dim=2).values``: ``--pool``), dropout, ``cat``; multi-label tags
  trained with ``BCEWithLogitsLoss(pos_weight=...)`` (the tags' negative-to-positive ratio), scored by a micro F1
  from tensor ops;
- ``wavenet``: causal dilated ``nn.Conv1d`` blocks on signals (``F.pad(x, (dilation * (k - 1), 0))`` then the
  convolution), the gated activation ``tanh * sigmoid``, residual and skip connections, ``BatchNorm1d``,
  ``MaxPool1d`` and ``AdaptiveAvgPool1d(1)``; ``--features spectrogram`` feeds it log power spectra instead
  (``torch.stft(..., window=torch.hann_window(n_fft), return_complex=True).abs().pow(2)``), a channel per frequency.

The text batches come from a ``DataLoader`` over a list of ``(label, tokens)`` pairs with a ``collate_fn``
(``pad_sequence(batch_first=True)`` and the lengths, or the flat tokens and offsets); the signals from a
``TensorDataset``. ``CrossEntropyLoss`` for the single-label models, Adam or RMSprop (``--optimizer``),
``clip_grad_value_``, and every ``--eval-every`` steps a validation loss under ``torch.no_grad()`` (``model.eval()``,
then ``model.train()`` again) that steps a ``ReduceLROnPlateau``; accuracy from ``argmax``. The data are drawn with
NumPy from ``--seed``. Only the imports name the framework.

    python text_audio_idioms.py --arch lstm --steps 20

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, TensorDataset

ARCHS = ("bag", "lstm", "textcnn", "wavenet")
VOCAB, CLASSES, TAGS = 60, 4, 5


def make_text(n, min_len=5, max_len=24, seed=0):
    """Sentences whose class is the topic of some of their words: each class owns a slice of the vocabulary, the
    other words are noise. Apart from that, each of the tags is set (independently, about one time in four) when
    one of its own words occurs."""
    rs = np.random.RandomState(seed)
    topic = np.arange(1, 1 + CLASSES * 8).reshape(CLASSES, 8)
    tag_words = 1 + CLASSES * 8 + np.arange(TAGS * 5).reshape(TAGS, 5)
    plain = np.setdiff1d(np.arange(1, VOCAB), tag_words)
    samples, tags = [], []
    for _ in range(n):
        length = rs.randint(min_len, max_len + 1)
        label = rs.randint(CLASSES)
        words = rs.choice(plain, length)
        on_topic = rs.rand(length) < 0.4
        words[on_topic] = rs.choice(topic[label], on_topic.sum())
        for tag in np.flatnonzero(rs.rand(TAGS) < 0.25):
            words[rs.randint(length)] = rs.choice(tag_words[tag])
        samples.append((int(label), words.astype(np.int64)))
        tags.append(np.isin(tag_words, words).any(axis=1).astype(np.float32))
    return samples, np.stack(tags)


def make_signals(n, length=128, seed=0):
    """Noisy tones whose class is their frequency band, at a random phase and amplitude."""
    rs = np.random.RandomState(seed)
    labels = rs.randint(0, CLASSES, n)
    freq = (2 + 3 * labels + rs.rand(n)) / length
    t = np.arange(length)
    x = (0.5 + rs.rand(n, 1)) * np.sin(2 * np.pi * freq[:, None] * t + 2 * np.pi * rs.rand(n, 1))
    x = x + 0.3 * rs.randn(n, length)
    return x[:, None, :].astype(np.float32), labels


def collate_padded(batch):
    """(labels, padded tokens, lengths): the padding index is 0."""
    labels = torch.tensor([label for label, _ in batch], dtype=torch.int64)
    texts = [torch.tensor(words, dtype=torch.int64) for _, words in batch]
    lengths = torch.tensor([len(t) for t in texts])
    return labels, pad_sequence(texts, batch_first=True, padding_value=0), lengths


def collate_offsets(batch):
    """(labels, tokens of the whole batch end to end, offset of each sample's first token)."""
    label_list, text_list, offsets = [], [], [0]
    for label, words in batch:
        label_list.append(label)
        processed_text = torch.tensor(words, dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    return label_list, torch.cat(text_list), offsets


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class, sparse=False):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, mode="mean", sparse=sparse)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        return self.fc(self.embedding(text, offsets))


class AttentionLSTM(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden, num_class, dropout=0.2, attention="bmm", mask_value="-inf"):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden, num_layers=2, bidirectional=True, batch_first=True, dropout=dropout)
        self.score = nn.Linear(2 * hidden, 1)
        self.fc = nn.Linear(4 * hidden, num_class)
        self.attention, self.mask_value = attention, mask_value

    def forward(self, text, lengths):
        embedded = self.embedding(text)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, (h_n, c_n) = self.lstm(packed)
        out, _ = pad_packed_sequence(packed_out, batch_first=True)  # (B, T, 2H), T the longest in the batch
        scores = self.score(out).squeeze(-1)
        mask = torch.arange(out.size(1), device=out.device)[None, :] < lengths.to(out.device)[:, None]
        fill = float("-inf") if self.mask_value == "-inf" else torch.finfo(scores.dtype).min
        weights = F.softmax(scores.masked_fill(~mask, fill), dim=1)
        if self.attention == "bmm":
            context = torch.bmm(weights.unsqueeze(1), out).squeeze(1)
        else:
            context = torch.einsum("bt,bth->bh", weights, out)
        final = torch.cat((h_n[-2], h_n[-1]), dim=1)  # the last layer's forward and backward states
        return self.fc(torch.cat([context, final], dim=1))


class TextCNN(nn.Module):
    def __init__(self, vocab_size, embed_dim, n_filters, filter_sizes, output_dim, dropout=0.5, pool="max_pool1d"):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(embed_dim, n_filters, fs) for fs in filter_sizes])
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(len(filter_sizes) * n_filters, output_dim)
        self.pool = pool

    def forward(self, text):
        embedded = self.embedding(text).permute(0, 2, 1)  # (B, E, T): channels first for Conv1d
        conved = [F.relu(conv(embedded)) for conv in self.convs]
        if self.pool == "max_pool1d":
            pooled = [F.max_pool1d(c, c.size(2)).squeeze(2) for c in conved]
        else:
            pooled = [c.max(dim=2).values for c in conved]
        return self.fc(self.dropout(torch.cat(pooled, dim=1)))


class GatedResidualBlock(nn.Module):
    def __init__(self, channels, skip_channels, kernel_size, dilation):
        super().__init__()
        self.pad = dilation * (kernel_size - 1)  # all on the left: the output at t sees inputs up to t
        self.filter_conv = nn.Conv1d(channels, channels, kernel_size, dilation=dilation)
        self.gate_conv = nn.Conv1d(channels, channels, kernel_size, dilation=dilation)
        self.residual = nn.Conv1d(channels, channels, 1)
        self.skip = nn.Conv1d(channels, skip_channels, 1)

    def forward(self, x):
        h = F.pad(x, (self.pad, 0))
        z = torch.tanh(self.filter_conv(h)) * torch.sigmoid(self.gate_conv(h))
        return x + self.residual(z), self.skip(z)


class WaveNetClassifier(nn.Module):
    def __init__(self, in_channels=1, channels=16, skip_channels=32, kernel_size=2, dilations=(1, 2, 4, 8),
                 num_class=4):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(in_channels, channels, 3, padding=1, bias=False), nn.BatchNorm1d(channels),
                                   nn.ReLU())
        self.blocks = nn.ModuleList([GatedResidualBlock(channels, skip_channels, kernel_size, d) for d in dilations])
        # no bias before a norm: it would subtract it again (and Adam would blow up its zero gradient's rounding)
        self.head = nn.Sequential(nn.ReLU(), nn.Conv1d(skip_channels, skip_channels, 1, bias=False),
                                  nn.BatchNorm1d(skip_channels), nn.ReLU(), nn.MaxPool1d(2), nn.AdaptiveAvgPool1d(1),
                                  nn.Flatten(), nn.Linear(skip_channels, num_class))

    def forward(self, x):
        x = self.front(x)
        skips = 0
        for block in self.blocks:
            x, skip = block(x)
            skips = skips + skip
        return self.head(skips)


def f1_score(logits, targets, threshold=0.5, eps=1e-8):
    """Micro F1 of multi-label predictions."""
    preds = (torch.sigmoid(logits) > threshold).float()
    tp = (preds * targets).sum()
    fp = (preds * (1 - targets)).sum()
    fn = ((1 - preds) * targets).sum()
    return (2 * tp / (2 * tp + fp + fn + eps)).item()


def build(args, device, seed):
    """The model, its loss, a forward on one batch (-> logits, targets) and the training and validation loaders."""
    if args.arch == "wavenet":
        x, y = make_signals(args.train_size + args.valid_size, seed=seed)
        data = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
        train = torch.utils.data.Subset(data, range(args.train_size))
        valid = torch.utils.data.Subset(data, range(args.train_size, len(data)))
        spectrogram = args.features == "spectrogram"
        model = WaveNetClassifier(in_channels=args.n_fft // 2 + 1 if spectrogram else 1, num_class=CLASSES)
        window = torch.hann_window(args.n_fft, device=device)
        collate = None

        def forward(batch):
            signals, labels = batch
            signals = signals.to(device)
            if spectrogram:  # (B, 1, L) -> (B, n_fft // 2 + 1, frames)
                spec = torch.stft(signals.squeeze(1), n_fft=args.n_fft, hop_length=args.n_fft // 4, window=window,
                                  return_complex=True)
                spec = torch.log1p(spec.abs().pow(2))  # log-compressed power: no blow-up of the empty bins
                # each spectrogram standardized (its loud bands stay loud)
                signals = (spec - spec.mean(dim=(1, 2), keepdim=True)) / (spec.std(dim=(1, 2), keepdim=True) + 1e-5)
            return model(signals), labels.to(device)
        criterion = nn.CrossEntropyLoss()
    else:
        samples, tags = make_text(args.train_size + args.valid_size, seed=seed)
        if args.arch == "textcnn":  # each sample's label is its row of tags
            samples = [(i, words) for i, (_, words) in enumerate(samples)]
        train, valid = samples[:args.train_size], samples[args.train_size:]
        collate = collate_offsets if args.arch == "bag" else collate_padded
        if args.arch == "bag":
            model = TextClassificationModel(VOCAB, args.embed_dim, CLASSES, sparse=args.sparse)
        elif args.arch == "lstm":
            model = AttentionLSTM(VOCAB, args.embed_dim, args.hidden, CLASSES, dropout=args.dropout,
                                  attention=args.attention, mask_value=args.mask_value)
        else:
            model = TextCNN(VOCAB, args.embed_dim, args.filters, (3, 4, 5), TAGS, dropout=args.dropout, pool=args.pool)
            # "pretrained" word vectors copied in, the padding row zeroed
            vectors = np.random.RandomState(seed + 1).randn(VOCAB, args.embed_dim).astype(np.float32)
            model.embedding.weight.data.copy_(torch.from_numpy(vectors))
            model.embedding.weight.data[0] = torch.zeros(args.embed_dim)
        tag_table = torch.from_numpy(tags).to(device)

        def forward(batch):
            labels, text, extra = batch
            if args.arch == "textcnn":
                return model(text.to(device)), tag_table[labels.to(device)]
            return model(text.to(device), extra.to(device)), labels.to(device)  # offsets or lengths
        if args.arch == "textcnn":
            positives = tag_table[:args.train_size].sum(0)
            pos_weight = (args.train_size - positives) / positives.clamp(min=1)
            criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
        else:
            criterion = nn.CrossEntropyLoss()
    train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=not args.no_shuffle, collate_fn=collate,
                              drop_last=True)
    valid_loader = DataLoader(valid, batch_size=64, collate_fn=collate)
    return model.to(device), criterion, forward, train_loader, valid_loader


def evaluate(model, criterion, forward, loader, multilabel):
    """The mean validation loss and the accuracy (the micro F1 for tags)."""
    model.eval()
    total, score, count = 0.0, 0.0, 0
    with torch.no_grad():
        for batch in loader:
            logits, targets = forward(batch)
            n = targets.size(0)
            total += criterion(logits, targets).item() * n
            if multilabel:
                score += f1_score(logits, targets) * n
            else:
                score += (logits.argmax(dim=1) == targets).float().sum().item()
            count += n
    model.train()
    return total / count, score / count


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=ARCHS, default="lstm")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--train-size", type=int, default=320)
    p.add_argument("--valid-size", type=int, default=64)
    p.add_argument("--embed-dim", type=int, default=16)
    p.add_argument("--hidden", type=int, default=16, help="LSTM units per direction")
    p.add_argument("--filters", type=int, default=16, help="TextCNN filters per kernel size")
    p.add_argument("--attention", choices=("bmm", "einsum"), default="bmm", help="with --arch lstm")
    p.add_argument("--mask-value", choices=("-inf", "finfo"), default="-inf", help="with --arch lstm")
    p.add_argument("--pool", choices=("max_pool1d", "max"), default="max_pool1d", help="with --arch textcnn")
    p.add_argument("--features", choices=("raw", "spectrogram"), default="raw", help="with --arch wavenet")
    p.add_argument("--n-fft", type=int, default=32, help="with --features spectrogram")
    p.add_argument("--optimizer", choices=("adam", "rmsprop"), default="adam")
    p.add_argument("--sparse", action="store_true", help="with --arch bag: sparse embedding gradients, SparseAdam")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--clip", type=float, default=0.5, help="largest gradient entry")
    p.add_argument("--eval-every", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    model, criterion, forward, train_loader, valid_loader = build(args, device, args.seed)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizers = []
    if args.sparse:  # the embedding's sparse gradients to an optimizer that takes them, the rest as usual
        sparse_params = list(model.embedding.parameters())
        optimizers.append(torch.optim.SparseAdam(sparse_params, lr=args.lr))
        dense_params = [p for name, p in model.named_parameters() if not name.startswith("embedding.")]
    else:
        dense_params = list(model.parameters())
    if args.optimizer == "adam":
        optimizers.append(torch.optim.Adam(dense_params, lr=args.lr))
    else:
        optimizers.append(torch.optim.RMSprop(dense_params, lr=args.lr, alpha=0.9))
    schedulers = [torch.optim.lr_scheduler.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=0)
                  for o in optimizers]
    multilabel = args.arch == "textcnn"

    losses, step = [], 0
    model.train()
    while step < args.steps:
        for batch in train_loader:
            if step == args.steps:
                break
            logits, targets = forward(batch)
            loss = criterion(logits, targets)
            for optimizer in optimizers:
                optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_value_(dense_params, clip_value=args.clip)  # (sparse gradients cannot be)
            for optimizer in optimizers:
                optimizer.step()
            losses.append(loss.item())
            step += 1
            if step % args.eval_every == 0:
                val_loss, _ = evaluate(model, criterion, forward, valid_loader, multilabel)
                for scheduler in schedulers:
                    scheduler.step(val_loss)
    val_loss, score = evaluate(model, criterion, forward, valid_loader, multilabel)
    assert math.isfinite(val_loss)
    print(f"{args.arch}: validation loss {val_loss:.3f}, {'F1' if multilabel else 'accuracy'} {score:.2f}, "
          f"lr {optimizers[-1].param_groups[0]['lr']:.1e}")
    return losses


if __name__ == "__main__":
    print(main())
