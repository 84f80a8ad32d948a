"""One decoder step as a pure function of its inputs, in both attention placements.

The decoder state is a tuple of **batch-first** tensors (see
``ModelConfig.state_names``): ``hidden`` ``(rows, layers, H)``, ``cell``
``(rows, layers, H)`` for LSTM, ``feed`` ``(rows, output_dim)`` for Luong input
feeding, ``coverage`` ``(rows, src_len)`` (the sum of past attention weights, 0 at
padding) for coverage models. Batch-first means beam reordering or retiring rows is
one gather along axis 0, the same in PyTorch, numpy and ONNX.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.attention import Attention
from models.config import ModelConfig

DecoderState = tuple[Tensor, ...]


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(
            config.tgt_vocab_size, config.embed_dim, padding_idx=config.pad_id
        )
        self.dropout = nn.Dropout(config.dropout)
        self.attention = Attention(config)
        if config.placement == "bahdanau":
            first_input = config.embed_dim + config.memory_dim
            self.pre_output = nn.Linear(
                config.decoder_hidden + config.memory_dim + config.embed_dim, config.output_dim
            )
        else:
            first_input = config.embed_dim + (config.output_dim if config.input_feed else 0)
            self.pre_output = nn.Linear(
                config.decoder_hidden + config.memory_dim, config.output_dim
            )
        cell_cls = nn.LSTMCell if config.has_cell else nn.GRUCell
        self.cells = nn.ModuleList(
            cell_cls(first_input if i == 0 else config.decoder_hidden, config.decoder_hidden)
            for i in range(config.decoder_layers)
        )
        self.output = nn.Linear(config.output_dim, config.tgt_vocab_size)

    def initial_state(self, init_hidden: Tensor, mask: Tensor) -> DecoderState:
        """Build the step-0 state from the encoder bridge.

        Args:
            init_hidden: ``(batch, decoder_layers, decoder_hidden)``.
            mask: ``(batch, src_len)`` bool source mask (the coverage state's shape).
        """
        state = [init_hidden]
        if self.config.has_cell:
            state.append(torch.zeros_like(init_hidden))
        if self.config.uses_input_feed:
            state.append(init_hidden.new_zeros(init_hidden.size(0), self.config.output_dim))
        if self.config.coverage:
            state.append(torch.zeros_like(mask, dtype=init_hidden.dtype))
        return tuple(state)

    def _run_cells(self, x: Tensor, state: DecoderState) -> tuple[Tensor, Tensor | None]:
        """Advance the stacked cells; returns new hidden (and cell) ``(rows, layers, H)``."""
        hidden = state[0]
        cell = state[1] if self.config.has_cell else None
        new_h, new_c = [], []
        for i, rnn in enumerate(self.cells):
            if i > 0:
                x = self.dropout(x)
            if cell is not None:
                h, c = rnn(x, (hidden[:, i], cell[:, i]))
                new_c.append(c)
            else:
                h = rnn(x, hidden[:, i])
            new_h.append(h)
            x = h
        return torch.stack(new_h, 1), (torch.stack(new_c, 1) if cell is not None else None)

    def forward(
        self,
        prev_tokens: Tensor,
        state: DecoderState,
        keys: Tensor,
        memory: Tensor,
        mask: Tensor,
    ) -> tuple[Tensor, DecoderState, Tensor]:
        """One decoding step: :meth:`features` then the vocabulary projection.

        Args:
            prev_tokens: ``(rows,)`` int64 previously emitted token (BOS at step 0).
            state: decoder state tuple, each tensor batch-first with ``rows`` rows.
            keys: ``(rows, src_len, K)`` precomputed attention keys.
            memory: ``(rows, src_len, D)`` encoder outputs.
            mask: ``(rows, src_len)`` bool, True at real source tokens.

        Returns:
            logits: ``(rows, tgt_vocab)`` unnormalised next-token scores.
            state: the new decoder state.
            weights: ``(rows, src_len)`` attention weights of this step.
        """
        pre, new_state, weights = self.features(prev_tokens, state, keys, memory, mask)
        return self.project(pre), new_state, weights

    def project(self, pre: Tensor) -> Tensor:
        """Vocabulary logits ``(..., tgt_vocab)`` of pre-output vectors ``(..., output_dim)``."""
        return self.output(self.dropout(pre))

    def features(
        self,
        prev_tokens: Tensor,
        state: DecoderState,
        keys: Tensor,
        memory: Tensor,
        mask: Tensor,
    ) -> tuple[Tensor, DecoderState, Tensor]:
        """The step up to the pre-output vector ``(rows, output_dim)``; arguments as
        :meth:`forward`. Training projects all steps at once, which is much faster."""
        cfg = self.config
        coverage = state[cfg.state_names.index("coverage")] if cfg.coverage else None
        emb = self.dropout(self.embedding(prev_tokens))
        if cfg.placement == "bahdanau":
            context, weights = self.attention(state[0][:, -1], keys, memory, mask, coverage)
            hidden, cell = self._run_cells(torch.cat([emb, context], -1), state)
            top = hidden[:, -1]
            pre = torch.tanh(self.pre_output(torch.cat([top, context, emb], -1)))
            new_state = [hidden] + ([cell] if cell is not None else [])
        else:
            if cfg.input_feed:
                x = torch.cat([emb, state[cfg.state_names.index("feed")]], -1)
            else:
                x = emb
            hidden, cell = self._run_cells(x, state)
            top = hidden[:, -1]
            context, weights = self.attention(top, keys, memory, mask, coverage)
            pre = torch.tanh(self.pre_output(torch.cat([top, context], -1)))
            new_state = [hidden] + ([cell] if cell is not None else [])
            if cfg.input_feed:
                new_state.append(pre)
        if coverage is not None:
            new_state.append(coverage + weights)
        return pre, tuple(new_state), weights
