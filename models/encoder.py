"""Embedding -> stacked (bi)directional GRU/LSTM over variable-length padded batches."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.config import ModelConfig


def reverse_index(lengths: Tensor, max_len: int) -> Tensor:
    """Per-row index that reverses the first ``length`` positions and keeps padding in place.

    Args:
        lengths: ``(batch,)`` int64 true lengths, each >= 1.
        max_len: padded length ``src_len``.

    Returns:
        ``(batch, src_len)`` int64; applying it twice is the identity.
    """
    positions = torch.arange(max_len, device=lengths.device).unsqueeze(0)
    lens = lengths.unsqueeze(1)
    return torch.where(positions < lens, lens - 1 - positions, positions)


def _gather_time(x: Tensor, index: Tensor) -> Tensor:
    """Reorder ``x`` ``(batch, src_len, dim)`` along time by ``index`` ``(batch, src_len)``."""
    return torch.gather(x, 1, index.unsqueeze(-1).expand(-1, -1, x.size(-1)))


class Encoder(nn.Module):
    """Encodes source ids into memory vectors and a bridged initial decoder state.

    Variable lengths are exact: the forward direction never reads past a row's
    length for the positions that count (padding is at the end), and the backward
    direction runs over each row reversed *within its length*. This computes the
    same values as ``pack_padded_sequence`` but is made of Gather and RNN ops only,
    so the very same code traces to ONNX with dynamic batch and length axes.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        rnn_cls = nn.LSTM if config.has_cell else nn.GRU
        self.embedding = nn.Embedding(
            config.src_vocab_size, config.embed_dim, padding_idx=config.pad_id
        )
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList()
        for layer in range(config.encoder_layers):
            input_size = config.embed_dim if layer == 0 else config.memory_dim
            self.layers.append(
                nn.ModuleList(
                    rnn_cls(input_size, config.encoder_hidden, batch_first=True)
                    for _ in range(config.directions)
                )
            )
        self.bridge = nn.Linear(config.memory_dim, config.decoder_layers * config.decoder_hidden)

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Encode a padded batch.

        Args:
            src: ``(batch, src_len)`` int64 token ids, padded with ``pad_id`` at the end.
            lengths: ``(batch,)`` int64 true lengths, 1 <= length <= src_len.

        Returns:
            memory: ``(batch, src_len, D)`` with ``D = memory_dim``; zeros at padding.
            init_hidden: ``(batch, decoder_layers, decoder_hidden)`` initial decoder state.
        """
        max_len = src.size(1)
        mask = torch.arange(max_len, device=src.device).unsqueeze(0) < lengths.unsqueeze(1)
        mask = mask.unsqueeze(-1).to(torch.float32)
        rev = reverse_index(lengths, max_len)
        last = (lengths - 1).view(-1, 1, 1)
        x = self.dropout(self.embedding(src))
        finals: list[Tensor] = []
        for layer in self.layers:
            outputs = []
            finals = []
            for direction, rnn in enumerate(layer):
                inp = x if direction == 0 else _gather_time(x, rev)
                out, _ = rnn(inp)
                if direction == 1:
                    out = _gather_time(out, rev)
                    finals.append(out[:, 0])
                else:
                    idx = last.expand(-1, 1, out.size(-1))
                    finals.append(torch.gather(out, 1, idx).squeeze(1))
                outputs.append(out)
            x = torch.cat(outputs, dim=-1) * mask
            if layer is not self.layers[-1]:
                x = self.dropout(x)
        summary = torch.cat(finals, dim=-1)
        init = torch.tanh(self.bridge(summary))
        init = init.view(src.size(0), self.config.decoder_layers, self.config.decoder_hidden)
        return x, init
