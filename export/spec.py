"""The bundle contract shared by ``export/`` (writer) and ``service/`` (reader).

Graph input/output names, the opset and the bundle's file names live here and
nowhere else. Torch-free: the service imports this module.

Encoder graph ``encoder.onnx``::

    src_ids      (batch, src_len) int64      -> memory   (batch, src_len, D) float
    src_lengths  (batch,)         int64      -> keys     (batch, src_len, K) float
                                             -> src_mask (batch, src_len)    bool
                                             -> init_<state> for each decoder state tensor

Decoder graph ``decoder.onnx`` (exactly one step over ``rows`` hypotheses)::

    prev_tokens  (rows,) int64    token emitted at the previous step (BOS first)
    parent_rows  (rows,) int64    row of the *state inputs* each row continues from;
                                  beam reordering happens in the graph
    row_sentence (rows,) int64    sentence of each row: index into memory/keys/mask
    memory, keys, src_mask        per sentence, shapes as the encoder outputs
    top_k        (1,)   int64     how many candidates to return per row
    <state>      (prev_rows, ...) each decoder state tensor, batch-first

    -> topk_log_probs (rows, top_k) float  best log-probs, pad/bos/eos excluded
    -> topk_ids       (rows, top_k) int64
    -> eos_log_probs  (rows,)       float  log-prob of EOS, kept apart so the host
                                          can ban or force it without a vocabulary copy
    -> attention      (rows, src_len) float
    -> <state>_out    (rows, ...)   new decoder state, batch-first

The ``coverage`` state (models with coverage attention: the sum of past attention
weights) is ``(rows, width)`` over source positions, 0 at padding. Its width need not be
the memory's ``src_len``: the graph cuts it or pads it with zeros to ``src_len``, so a
server whose memory pool narrows or widens as sentences come and go can feed the
previous step's output back as it is; when rows of different widths join, the host
pads the narrower with zeros. (Past a sentence's length the coverage is 0 anyway.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OPSET = 17
BUNDLE_FORMAT = "rnn-nmt-bundle/1"

ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder.onnx"
SRC_SPM_FILE = "source.spm.model"
TGT_SPM_FILE = "target.spm.model"
MANIFEST_FILE = "manifest.json"

# encoder
SRC_IDS = "src_ids"
SRC_LENGTHS = "src_lengths"
MEMORY = "memory"
KEYS = "keys"
SRC_MASK = "src_mask"
INIT_PREFIX = "init_"

# decoder
PREV_TOKENS = "prev_tokens"
PARENT_ROWS = "parent_rows"
ROW_SENTENCE = "row_sentence"
TOP_K = "top_k"
TOPK_LOG_PROBS = "topk_log_probs"
TOPK_IDS = "topk_ids"
EOS_LOG_PROBS = "eos_log_probs"
ATTENTION = "attention"
STATE_OUT_SUFFIX = "_out"
# the one state tensor whose second axis runs over source positions (see above)
COVERAGE = "coverage"


def encoder_inputs() -> list[str]:
    return [SRC_IDS, SRC_LENGTHS]


def encoder_outputs(state_names: tuple[str, ...]) -> list[str]:
    return [MEMORY, KEYS, SRC_MASK] + [INIT_PREFIX + s for s in state_names]


def decoder_inputs(state_names: tuple[str, ...]) -> list[str]:
    return [PREV_TOKENS, PARENT_ROWS, ROW_SENTENCE, MEMORY, KEYS, SRC_MASK, TOP_K, *state_names]


def decoder_outputs(state_names: tuple[str, ...]) -> list[str]:
    return [TOPK_LOG_PROBS, TOPK_IDS, EOS_LOG_PROBS, ATTENTION] + [
        s + STATE_OUT_SUFFIX for s in state_names
    ]


# -- what the service needs to know about a bundle's model -------------------------------

TOKENIZERS_KEY = "tokenizers"
# A bundle without a "tokenizers" entry (every bundle written before there were two
# kinds) has SentencePiece models under these names.
LEGACY_TOKENIZERS = {
    "source": {"kind": "sentencepiece", "file": SRC_SPM_FILE},
    "target": {"kind": "sentencepiece", "file": TGT_SPM_FILE},
}


class ContractError(ValueError):
    """A manifest whose decoding contract is missing or inconsistent."""


@dataclass(frozen=True)
class BundleConfig:
    """The decoding contract of a bundle, whatever model it came from.

    ``exact_lengths``: the encoder was traced from a module that does not take source
    lengths (it would read padding as input), so a batch must be encoded in groups of
    equal length; :class:`service.runtime.OnnxModel` does that.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    pad_id: int
    unk_id: int
    bos_id: int
    eos_id: int
    state_names: tuple[str, ...]
    exact_lengths: bool = False
    max_source_tokens: int | None = None

    def __post_init__(self) -> None:
        specials = (self.pad_id, self.unk_id, self.bos_id, self.eos_id)
        if len(set(specials)) != 4:
            raise ContractError(f"pad, unk, bos and eos ids must be distinct, got {specials}")
        if min(specials) < 0 or max(self.pad_id, self.bos_id, self.eos_id) >= self.tgt_vocab_size:
            raise ContractError(
                f"special ids {specials} must lie in the target vocabulary "
                f"(0..{self.tgt_vocab_size - 1})"
            )
        if self.pad_id >= self.src_vocab_size:
            raise ContractError(
                f"the pad id must lie in the source vocabulary (0..{self.src_vocab_size - 1})"
            )
        # the target's unk (a source tokenizer with a vocabulary of its own maps unknown
        # words to its own unk: service.bundle.Bundle.source_unk_id)
        if self.unk_id >= max(self.src_vocab_size, self.tgt_vocab_size):
            raise ContractError(
                f"the unk id {self.unk_id} lies outside both vocabularies "
                f"({self.src_vocab_size} and {self.tgt_vocab_size} tokens)"
            )
        if not self.state_names or len(set(self.state_names)) != len(self.state_names):
            raise ContractError(f"state names must be distinct and non-empty: {self.state_names}")

    def check_vocabularies(self, src_size: int, tgt_size: int) -> None:
        """The tokenizers' vocabulary sizes must be the model's."""
        for side, got, want in (
            ("source", src_size, self.src_vocab_size),
            ("target", tgt_size, self.tgt_vocab_size),
        ):
            if got != want:
                raise ContractError(
                    f"the {side} tokenizer has {got} tokens but the model's {side} "
                    f"vocabulary has {want}"
                )

    def manifest_fields(self) -> dict[str, Any]:
        return {
            "src_vocab_size": self.src_vocab_size,
            "tgt_vocab_size": self.tgt_vocab_size,
            "special_ids": {
                "pad": self.pad_id,
                "unk": self.unk_id,
                "bos": self.bos_id,
                "eos": self.eos_id,
            },
            "state_names": list(self.state_names),
            "exact_lengths": self.exact_lengths,
        }

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> BundleConfig:
        try:
            special = manifest["special_ids"]
            return cls(
                src_vocab_size=int(manifest["src_vocab_size"]),
                tgt_vocab_size=int(manifest["tgt_vocab_size"]),
                pad_id=int(special["pad"]),
                unk_id=int(special["unk"]),
                bos_id=int(special["bos"]),
                eos_id=int(special["eos"]),
                state_names=tuple(manifest["state_names"]),
                exact_lengths=bool(manifest.get("exact_lengths", False)),
                max_source_tokens=_optional_int(manifest.get("max_source_tokens")),
            )
        except (KeyError, TypeError) as exc:
            raise ContractError(f"manifest lacks {exc} of the decoding contract") from None


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ContractError(f"max_source_tokens must be a positive integer, got {value!r}")
    return value
