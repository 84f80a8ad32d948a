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


def weighted_sum(weights: Tensor, values: Tensor) -> Tensor:
    """``sum_s weights[b, s] values[b, s]``: ``(B,S)``, ``(B,S,D)`` -> ``(B,D)``, each
    row's sum in the same order whatever the batch and its padding. A batched product
    of two rows (the same row twice): ONNX Runtime multiplies a single row by a
    non-constant matrix in an order that changes with the padding (1e-7 apart, which an
    int8 graph's per-row scales turn into 1e-4), and sums over ``(B,S,D)`` in an order
    that changes with B. Bundles exported before this was the rule get the same form at
    load time (:mod:`service.poolwidth`)."""
    return torch.bmm(weights.unsqueeze(1).expand(-1, 2, -1), values)[:, 0]


class Attention(nn.Module):
    """``score(s, h)`` for one of: additive ``v^T tanh(W s + U h)`` (Bahdanau), Luong
    ``dot`` ``s^T h``, ``general`` ``s^T W h`` and ``concat`` ``v^T tanh(W [s; h])``.

    ``local-p`` (Luong et al. 2015) scores like ``general`` around a predicted position
    only; see :meth:`_local_p`.

    With ``config.coverage`` the additive and concat hidden layers also get ``w_c c_j``,
    ``c_j`` the attention source position ``j`` has had so far (Tu et al. 2016)."""

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
        elif self.kind in ("general", "local-p"):
            self.key_proj = nn.Linear(memory_dim, query_dim, bias=False)
        elif self.kind == "concat":
            self.concat_proj = nn.Linear(query_dim + memory_dim, att_dim, bias=False)
            self.v = nn.Linear(att_dim, 1, bias=False)
        if self.kind == "local-p":
            # p_t = S sigmoid(v_p^T tanh(W_p h_t)); sigma = D / 2 as in Luong et al.
            self.position_proj = nn.Linear(query_dim, att_dim, bias=False)
            self.position_v = nn.Linear(att_dim, 1, bias=False)
            self.window = config.local_window
        # w_c: one learned vector of attention_dim, scaled by each position's coverage.
        self.coverage_proj = nn.Linear(1, att_dim, bias=False) if config.coverage else None

    @property
    def has_keys(self) -> bool:
        """Whether ``keys`` precomputes something other than the memory itself."""
        return self.kind in ("additive", "general", "local-p")

    def keys(self, memory: Tensor) -> Tensor:
        """Per-sentence precomputation.

        Args:
            memory: ``(batch, src_len, D)`` encoder outputs.

        Returns:
            ``(batch, src_len, K)``: ``U h`` (K = attention_dim) for additive, ``W h``
            (K = decoder_hidden) for general and local-p, the memory itself for dot and
            concat.
        """
        if self.has_keys:
            return self.key_proj(memory)
        return memory

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        memory: Tensor,
        mask: Tensor,
        coverage: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """One attention read.

        Args:
            query: ``(rows, decoder_hidden)`` decoder state used as the query.
            keys: ``(rows, src_len, K)`` from :meth:`keys`.
            memory: ``(rows, src_len, D)`` encoder outputs.
            mask: ``(rows, src_len)`` bool, True at real source tokens.
            coverage: ``(rows, src_len)`` sum of the past steps' weights, when the
                model has coverage (``None`` otherwise).

        Returns:
            context: ``(rows, D)`` weighted sum of memory.
            weights: ``(rows, src_len)`` attention weights, exactly 0 at padding.
        """
        if self.kind in ("dot", "general", "local-p"):
            # elementwise, not a bmm by one column: ONNX Runtime sums that in an order
            # that changes with the number of source positions (the pool's width)
            scores = (keys * query.unsqueeze(1)).sum(-1)
            if self.kind == "local-p":
                scores, mask = self._local_p(query, scores, mask)
        else:
            if self.kind == "additive":
                pre = keys + self.query_proj(query).unsqueeze(1)
            else:
                expanded = query.unsqueeze(1).expand(-1, keys.size(1), -1)
                pre = self.concat_proj(torch.cat([expanded, keys], dim=-1))
            if self.coverage_proj is not None:
                pre = pre + self.coverage_proj(coverage.unsqueeze(-1))
            scores = self.v(torch.tanh(pre)).squeeze(-1)
        weights = masked_softmax(scores, mask)
        context = weighted_sum(weights, memory)  # the same whatever the pool's width
        return context, weights

    def _local_p(self, query: Tensor, scores: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Luong's local-p window: ``scores`` plus the log of the Gaussian
        ``exp(-(j - p_t)^2 / (2 sigma^2))`` and ``mask`` narrowed to ``|j - p_t| <= D``.

        Every row keeps a real position to attend to: ``p_t`` lies in ``[0, S]`` (``S``
        the row's real length) and ``D >= 1``, so the real position nearest ``p_t``
        (``S - 1`` when ``p_t`` is past it) is within 1 of it, inside the window.

        Args:
            query: ``(rows, decoder_hidden)`` the new decoder output ``h_t``.
            scores: ``(rows, src_len)`` general scores.
            mask: ``(rows, src_len)`` bool, True at real source tokens.

        Returns:
            ``(rows, src_len)`` scores and mask.
        """
        length = mask.sum(-1, keepdim=True).to(scores.dtype)
        gate = torch.sigmoid(self.position_v(torch.tanh(self.position_proj(query))))
        center = length * gate  # (rows, 1)
        positions = torch.arange(mask.size(1), device=mask.device).to(scores.dtype)
        offset = positions.unsqueeze(0) - center
        sigma = self.window / 2
        scores = scores - offset.square() / (2 * sigma * sigma)
        return scores, mask & (offset.abs() <= self.window)
