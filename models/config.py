"""The one frozen description of a model, saved inside every checkpoint.

This module imports nothing heavy so that the export manifest and the service can
read a config without torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

RNN_TYPES = ("gru", "lstm")
ATTENTION_TYPES = ("additive", "dot", "general", "concat", "local-p")
# Attention that needs the new decoder output h_t as its query (it predicts its window
# from it): only the Luong placement attends with h_t.
LUONG_ONLY_ATTENTION = ("local-p",)
# Scores with a hidden layer ``tanh(... + w_c c_j)`` that the coverage term can join.
COVERAGE_ATTENTION = ("additive", "concat")
PLACEMENTS = ("bahdanau", "luong")

# Special token ids are fixed for every tokenizer this project trains.
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3


class ConfigError(ValueError):
    """A model configuration that cannot describe a working model."""


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of an attention RNN encoder-decoder.

    ``placement="bahdanau"`` attends with the previous decoder state and feeds the
    context into the RNN; ``placement="luong"`` attends with the new RNN output and
    builds the attentional vector ``tanh(W_c [h; c])`` (optionally fed back as input).

    ``attention="local-p"`` (Luong et al. 2015): each step predicts a source position
    ``p_t = S sigmoid(v_p^T tanh(W_p h_t))`` (``S`` the sentence's length) and attends,
    with ``general`` scores weighted by a Gaussian of sigma ``local_window / 2`` around
    it, only to the positions within ``local_window`` of ``p_t``.

    ``coverage=True`` (Tu et al. 2016, "Modeling Coverage for NMT"): the decoder keeps
    the sum of its past attention weights per source position and the score sees it,
    ``v^T tanh(W s + U h + w_c c_j)``, so the model can learn to leave covered words.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    rnn_type: str = "gru"
    embed_dim: int = 256
    encoder_hidden: int = 256
    encoder_layers: int = 1
    bidirectional: bool = True
    decoder_hidden: int = 512
    decoder_layers: int = 1
    attention: str = "additive"
    attention_dim: int = 256
    local_window: int = 5
    placement: str = "bahdanau"
    input_feed: bool = True
    coverage: bool = False
    output_dim: int = 256
    dropout: float = 0.1
    pad_id: int = PAD_ID
    unk_id: int = UNK_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID

    def __post_init__(self) -> None:
        if self.rnn_type not in RNN_TYPES:
            raise ConfigError(f"rnn_type must be one of {RNN_TYPES}, got {self.rnn_type!r}")
        if self.attention not in ATTENTION_TYPES:
            raise ConfigError(f"attention must be one of {ATTENTION_TYPES}, got {self.attention!r}")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"placement must be one of {PLACEMENTS}, got {self.placement!r}")
        for name in (
            "src_vocab_size",
            "tgt_vocab_size",
            "embed_dim",
            "encoder_hidden",
            "encoder_layers",
            "decoder_hidden",
            "decoder_layers",
            "attention_dim",
            "local_window",
            "output_dim",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        specials = {self.pad_id, self.unk_id, self.bos_id, self.eos_id}
        if len(specials) != 4:
            raise ConfigError("pad, unk, bos and eos ids must be distinct")
        if max(specials) >= min(self.src_vocab_size, self.tgt_vocab_size):
            raise ConfigError("special token ids must be smaller than both vocabulary sizes")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.attention == "dot" and self.decoder_hidden != self.memory_dim:
            raise ConfigError(
                "dot attention needs decoder_hidden == encoder memory size "
                f"({self.memory_dim} = encoder_hidden x directions), got {self.decoder_hidden}; "
                "use 'general' or 'additive' attention or change the sizes"
            )
        if self.attention in LUONG_ONLY_ATTENTION and self.placement != "luong":
            raise ConfigError(
                f"attention {self.attention!r} predicts its window from the new decoder "
                f"output h_t, which only placement='luong' attends with; got "
                f"placement={self.placement!r}"
            )
        if self.coverage and self.attention not in COVERAGE_ATTENTION:
            raise ConfigError(
                f"coverage needs attention {' or '.join(map(repr, COVERAGE_ATTENTION))} "
                "(the coverage term w_c c_j joins their tanh hidden layer), "
                f"got attention={self.attention!r}; change the attention or drop coverage"
            )

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def memory_dim(self) -> int:
        """Size D of one encoder memory vector: ``encoder_hidden * directions``."""
        return self.encoder_hidden * self.directions

    @property
    def has_cell(self) -> bool:
        return self.rnn_type == "lstm"

    @property
    def uses_input_feed(self) -> bool:
        return self.placement == "luong" and self.input_feed

    @property
    def state_names(self) -> tuple[str, ...]:
        """Names of the decoder state tensors, in the order the decoder step uses them."""
        names = ["hidden"]
        if self.has_cell:
            names.append("cell")
        if self.uses_input_feed:
            names.append("feed")
        if self.coverage:
            names.append("coverage")
        return tuple(names)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown model config keys: {', '.join(unknown)}")
        return cls(**data)
