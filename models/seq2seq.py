"""The encoder-decoder: encoding once, teacher-forced training forward."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from models.config import ModelConfig
from models.decoder import Decoder, DecoderState
from models.encoder import Encoder


@dataclass
class Encoded:
    """Everything the decoder steps need about a batch of source sentences.

    memory: ``(batch, src_len, D)``; keys: ``(batch, src_len, K)``;
    mask: ``(batch, src_len)`` bool; state: initial decoder state (batch-first).
    """

    memory: Tensor
    keys: Tensor
    mask: Tensor
    state: DecoderState


def length_mask(lengths: Tensor, max_len: int) -> Tensor:
    """``(batch, max_len)`` bool mask, True at positions ``< lengths`` ``(batch,)``."""
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def encode(self, src: Tensor, lengths: Tensor) -> Encoded:
        """Encode ``src`` ``(batch, src_len)`` with true ``lengths`` ``(batch,)``."""
        memory, init_hidden = self.encoder(src, lengths)
        keys = self.decoder.attention.keys(memory)
        mask = length_mask(lengths, src.size(1))
        return Encoded(memory, keys, mask, self.decoder.initial_state(init_hidden, mask))

    def forward(
        self,
        src: Tensor,
        lengths: Tensor,
        tgt_in: Tensor,
        *,
        teacher_forcing_ratio: float = 1.0,
    ) -> Tensor:
        """Training forward: the logits of :meth:`decode_train`."""
        logits, _ = self.decode_train(
            src, lengths, tgt_in, teacher_forcing_ratio=teacher_forcing_ratio
        )
        return logits

    def decode_train(
        self,
        src: Tensor,
        lengths: Tensor,
        tgt_in: Tensor,
        *,
        teacher_forcing_ratio: float = 1.0,
    ) -> tuple[Tensor, Tensor]:
        """Training forward, with the attention the coverage loss reads.

        Args:
            src: ``(batch, src_len)`` source ids.
            lengths: ``(batch,)`` source lengths.
            tgt_in: ``(batch, tgt_len)`` decoder inputs (BOS + target[:-1]).
            teacher_forcing_ratio: probability of feeding the gold token instead of the
                model's own argmax at each step (sampled per step for the whole batch).

        Returns:
            ``(batch, tgt_len, tgt_vocab)`` logits and ``(batch, tgt_len, src_len)``
            attention weights.
        """
        enc = self.encode(src, lengths)
        state = enc.state
        prev = tgt_in[:, 0]
        features, weights = [], []
        for t in range(tgt_in.size(1)):
            pre, state, w = self.decoder.features(prev, state, enc.keys, enc.memory, enc.mask)
            features.append(pre)
            weights.append(w)
            if t + 1 < tgt_in.size(1):
                use_gold = teacher_forcing_ratio >= 1.0 or (
                    torch.rand(()).item() < teacher_forcing_ratio
                )
                # Projecting all steps at once (below) is faster; only a step that feeds
                # back its own prediction needs its logits now.
                prev = tgt_in[:, t + 1] if use_gold else self.decoder.project(pre).argmax(-1)
        return self.decoder.project(torch.stack(features, 1)), torch.stack(weights, 1)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())
