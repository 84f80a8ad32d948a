"""Attention score functions with source padding masks.

Every score function is split in two halves so a decoder step does the least work:
``keys(memory)`` runs once per sentence (Bahdanau's ``U h`` or Luong general's
``W h``), ``forward(query, keys, memory, mask)`` runs every step.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.config import ModelConfig


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over source positions that gives padded positions exactly zero weight.

    Args:
        scores: ``(rows, src_len)`` raw scores.
        mask: ``(rows, src_len)`` bool, True at real source tokens (at least one per row).

    Returns:
        ``(rows, src_len)`` weights; each row sums to 1 over real positions.
    """
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


class Attention(nn.Module):
    """``score(s, h)`` for one of: additive ``v^T tanh(W s + U h)`` (Bahdanau), Luong
    ``dot`` ``s^T h``, ``general`` ``s^T W h`` and ``concat`` ``v^T tanh(W [s; h])``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.kind = config.attention
        query_dim, memory_dim, att_dim = (
            config.decoder_hidden,
            config.memory_dim,
            config.attention_dim,
        )
        if self.kind == "additive":
            self.key_proj = nn.Linear(memory_dim, att_dim, bias=False)
            self.query_proj = nn.Linear(query_dim, att_dim, bias=True)
            self.v = nn.Linear(att_dim, 1, bias=False)
        elif self.kind == "general":
            self.key_proj = nn.Linear(memory_dim, query_dim, bias=False)
        elif self.kind == "concat":
            self.concat_proj = nn.Linear(query_dim + memory_dim, att_dim, bias=False)
            self.v = nn.Linear(att_dim, 1, bias=False)

    @property
    def has_keys(self) -> bool:
        """Whether ``keys`` precomputes something other than the memory itself."""
        return self.kind in ("additive", "general")

    def keys(self, memory: Tensor) -> Tensor:
        """Per-sentence precomputation.

        Args:
            memory: ``(batch, src_len, D)`` encoder outputs.

        Returns:
            ``(batch, src_len, K)``: ``U h`` (K = attention_dim) for additive, ``W h``
            (K = decoder_hidden) for general, the memory itself for dot and concat.
        """
        if self.has_keys:
            return self.key_proj(memory)
        return memory

    def forward(
        self, query: Tensor, keys: Tensor, memory: Tensor, mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        """One attention read.

        Args:
            query: ``(rows, decoder_hidden)`` decoder state used as the query.
            keys: ``(rows, src_len, K)`` from :meth:`keys`.
            memory: ``(rows, src_len, D)`` encoder outputs.
            mask: ``(rows, src_len)`` bool, True at real source tokens.

        Returns:
            context: ``(rows, D)`` weighted sum of memory.
            weights: ``(rows, src_len)`` attention weights, exactly 0 at padding.
        """
        if self.kind == "additive":
            hidden = torch.tanh(keys + self.query_proj(query).unsqueeze(1))
            scores = self.v(hidden).squeeze(-1)
        elif self.kind in ("dot", "general"):
            scores = torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)
        else:
            expanded = query.unsqueeze(1).expand(-1, keys.size(1), -1)
            hidden = torch.tanh(self.concat_proj(torch.cat([expanded, keys], dim=-1)))
            scores = self.v(hidden).squeeze(-1)
        weights = masked_softmax(scores, mask)
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
        return context, weights
