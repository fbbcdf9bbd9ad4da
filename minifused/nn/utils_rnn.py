"""``minifused.nn.utils.rnn``, as ``torch.nn.utils.rnn``: ``PackedSequence``, ``pack_padded_sequence``,
``pad_packed_sequence``, ``pad_sequence``, ``unpad_sequence``, ``pack_sequence``, ``unpack_sequence``,
``invert_permutation``. Packing and padding are differentiable (slices, ``cat``, ``stack``)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import backend
from ..ops import cat, full, stack
from ..ops.creation import as_tensor
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]


def _host_ints(t):
    """An integer tensor, list or array as a host int64 array (``batch_sizes`` and lengths live on the CPU)."""
    if isinstance(t, Tensor):
        return np.asarray(backend.to_device(t._data, backend.CPU)).astype(np.int64).reshape(-1)
    return np.asarray(t, dtype=np.int64).reshape(-1)


class _PackedSequenceBase(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedSequenceBase):
    """The rows of a batch of variable-length sequences grouped by time step: ``data`` (sum of lengths, *),
    ``batch_sizes`` (int64 on the CPU: how many sequences are still running at each step), ``sorted_indices``
    (the batch order by decreasing length, or None) and ``unsorted_indices`` (its inverse). Build it with
    ``pack_padded_sequence`` or ``pack_sequence``."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence((data, batch_sizes), sorted_indices=...), as PyTorch allows
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise InputTypeError("PackedSequence: expected data and batch_sizes, or a (data, batch_sizes) pair")
            data, batch_sizes = data
        if isinstance(batch_sizes, Tensor) and batch_sizes.device.type != "cpu":
            raise InputError("PackedSequence: batch_sizes should always be on CPU; build packed sequences with "
                             "pack_sequence or pack_padded_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """``data`` converted as ``Tensor.to``; the indices follow it to its device, ``batch_sizes`` stays."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t):
            return None if t is None else t.to(data.device)
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self.to(backend.float64)

    def float(self):
        return self.to(backend.float32)

    def half(self):
        return self.to(backend.float16)

    @property
    def is_cuda(self):
        return self.data.device.type == "cuda"


def invert_permutation(permutation):
    """The inverse of a permutation tensor (None for None)."""
    if permutation is None:
        return None
    perm = _host_ints(permutation)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=np.int64)
    return as_tensor(inv, device=permutation.device)


def _batch_sizes(lengths, steps):
    """``batch_sizes[t]`` = how many of the (decreasing) ``lengths`` exceed t."""
    return np.array([(lengths > t).sum() for t in range(steps)], dtype=np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) (``batch_first``: (B, T, *)) of sequences of ``lengths``. With
    ``enforce_sorted`` the lengths must be decreasing; otherwise the batch is sorted and the order kept."""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"pack_padded_sequence: input must be a Tensor, got {type(input).__name__}")
    dims = lengths.dim() if isinstance(lengths, Tensor) else np.ndim(lengths)
    if dims != 1:  # one length per sequence (a nested list is not flattened)
        raise RuntimeError(f"pack_padded_sequence: 'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{dims}D")
    lengths = _host_ints(lengths)
    batch_dim = 0 if batch_first else 1
    if input.dim() < 2:
        raise InputError(f"pack_padded_sequence: expected an input of at least 2 dimensions, got {input.dim()}")
    if lengths.size != input.shape[batch_dim]:
        raise RuntimeError(f"pack_padded_sequence: Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lengths.size} (batch_size={input.shape[batch_dim]})")
    if lengths.size and lengths.min() <= 0:
        raise RuntimeError("pack_padded_sequence: Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    steps = input.shape[1 - batch_dim]
    if lengths.size and lengths.max() > steps:
        raise RuntimeError(f"pack_padded_sequence: a length ({lengths.max()}) exceeds the input's {steps} steps")
    sorted_indices = None
    if enforce_sorted:
        if np.any(lengths[1:] > lengths[:-1]):
            raise RuntimeError("pack_padded_sequence: `lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` to pack_padded_sequence "
                               "and/or pack_sequence to sidestep this requirement if you do not need ONNX "
                               "exportability.")
    else:
        order = np.argsort(-lengths, kind="stable")  # PyTorch's sort keeps ties in batch order too
        lengths = lengths[order]
        sorted_indices = as_tensor(order, device=input.device)
        input = input.index_select(batch_dim, sorted_indices)
    sizes = _batch_sizes(lengths, int(lengths[0]) if lengths.size else 0)
    x = input.transpose(0, 1) if batch_first else input
    data = cat([x[t, :int(bs)] for t, bs in enumerate(sizes)], 0)
    return PackedSequence(data, as_tensor(sizes, device="cpu"), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of ``pack_padded_sequence``: ``(padded, lengths)``, padded (T, B, *) (``batch_first``:
    (B, T, *)) with T = ``total_length`` or the longest length, in the original batch order."""
    if not isinstance(sequence, PackedSequence):
        raise InputTypeError(f"pad_packed_sequence: expected a PackedSequence, got {type(sequence).__name__}")
    sizes = _host_ints(sequence.batch_sizes)
    steps = sizes.size
    if total_length is not None:
        if total_length < steps:
            raise InputError(f"pad_packed_sequence: Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max sequence length being "
                             f"{steps}")
        steps = int(total_length)
    data, batch = sequence.data, int(sizes[0])
    rest = tuple(data.shape[1:])

    def pad(rows):
        return full((rows,) + rest, padding_value, dtype=data.dtype, device=data.device)
    pieces = data.split(sizes.tolist(), 0) if sizes.size > 1 else [data]
    frames = [p if p.shape[0] == batch else cat([p, pad(batch - p.shape[0])], 0) for p in pieces]
    frames += [pad(batch)] * (steps - sizes.size)
    padded = stack(frames, 1 if batch_first else 0)
    lengths = np.array([(sizes > b).sum() for b in range(batch)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        unsorted = sequence.unsorted_indices
        padded = padded.index_select(0 if batch_first else 1, unsorted)
        lengths = lengths[_host_ints(unsorted)]
    return padded, as_tensor(lengths, device="cpu")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of shapes (L_i, *) into (max L, B, *) (``batch_first``: (B, max L, *)), each padded with
    ``padding_value`` on its ``padding_side`` (``'right'`` or ``'left'``)."""
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    try:
        sequences = list(sequences)
    except TypeError:
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}") from None
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"pad_sequence: Expected padding_side to be one of left or right, but got {padding_side}.")
    first = sequences[0]
    rest = tuple(first.shape[1:])
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor) or s.dim() < 1 or tuple(s.shape[1:]) != rest:
            got = type(s).__name__ if not isinstance(s, Tensor) else tuple(s.shape)
            raise RuntimeError(f"pad_sequence: every sequence must be a tensor of shape (L, *{rest}) like the "
                               f"first one, but sequence {i} is {got}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        s = s if s.dtype == first.dtype else s.to(first.dtype)  # the first sequence's dtype, as PyTorch's
        missing = longest - s.shape[0]
        if missing:
            fill = full((missing,) + rest, padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences (L_i, *) in a padded batch (unlike PyTorch, the input is not transposed in place)."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    lengths = _host_ints(lengths)
    if len(lengths) != x.shape[0]:  # (PyTorch's strict zip)
        raise InputError(f"unpad_sequence: got {len(lengths)} lengths for a batch of {x.shape[0]} sequences")
    return [x[b, :int(n)] for b, n in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i, *) (decreasing lengths unless ``enforce_sorted=False``)."""
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("pack_sequence: received an empty list of sequences")
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences in a ``PackedSequence``, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
