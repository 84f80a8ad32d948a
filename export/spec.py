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
"""

from __future__ import annotations

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
