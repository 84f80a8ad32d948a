"""TensorFlow's newer tutorial models: ``nmt-convert keras-text weights/ --source-vocabulary
context.json --target-vocabulary target.json --out DIR``.

The model the current version of TensorFlow's tutorial *Neural machine translation with
attention* (2022 on: ``TextVectorization``, ``tensorflow_text``) trains: an ``Encoder``
(Embedding with ``mask_zero`` + a bidirectional GRU whose directions are summed), a
``CrossAttention`` (one-head ``MultiHeadAttention`` of the decoder's GRU output over the
encoder's, added back and layer-normalised) and a ``Decoder`` (Embedding, GRU carrying its
state, the cross attention, a Dense output), as ``model.save_weights`` wrote them (read
without TensorFlow, :mod:`export.tf_checkpoint`), plus the two vocabularies
(``processor.get_vocabulary()`` as JSON: the checkpoint does not hold them).

What the tutorial does that the bundle reproduces: ``tf_lower_and_split_punct`` (NFKD,
lower-case, every character but `` a-z.?!,¿`` deleted, ``.?!,¿`` split off, ``[START]`` and
``[END]`` around the source), ``[UNK]`` for unknown words, each sentence encoded alone
(its mask), and ``translate``'s greedy loop: at most 50 tokens, ``[END]`` among them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from export.keras import KerasError, dense_from, gru_weights, loop_decoding
from export.modules import first_line, weighted_sum
from export.signature import Signature
from export.tf_checkpoint import CheckpointError, read_checkpoint, variable_values
from export.user import UserModel
from models.tokenizer import TokenizerError
from models.words import WordTokenizer

# tf_lower_and_split_punct: kept (the rest deleted), then split off
KEEP_ONLY = " abcdefghijklmnopqrstuvwxyz.?!,¿"
SPLIT_OFF = ".?!,¿"
START, END, UNK, MASK = "[START]", "[END]", "[UNK]", ""
PAD = "<pad>"  # the mask token "" named: a vocabulary entry needs a spelling
MAX_LENGTH = 50  # translate(max_length=50)
LAYERNORM_EPSILON = 1e-3  # Keras LayerNormalization's default
MHA = "decoder/attention/mha"
WEIGHTS = (
    "encoder/embedding/embeddings",
    *(f"encoder/rnn/{d}_layer/cell/{w}" for d in ("forward", "backward")
      for w in ("kernel", "recurrent_kernel", "bias")),
    "decoder/embedding/embeddings",
    *(f"decoder/rnn/cell/{w}" for w in ("kernel", "recurrent_kernel", "bias")),
    *(f"{MHA}/_{p}_dense/{w}" for p in ("query", "key", "value", "output")
      for w in ("kernel", "bias")),
    "decoder/attention/layernorm/gamma",
    "decoder/attention/layernorm/beta",
    "decoder/output_layer/kernel",
    "decoder/output_layer/bias",
)  # fmt: skip


class TextEncoder(nn.Module):
    """``forward(src (B,S)) -> (memory (B,S,U), hidden (B,U))``: the bidirectional GRU's
    two directions summed (``merge_mode='sum'``); the decoder starts from zeros
    (``get_initial_state``), returned as ``hidden``."""

    def __init__(self, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        table = torch.from_numpy(w["encoder/embedding/embeddings"])
        self.embedding = nn.Embedding.from_pretrained(table, freeze=True)
        fwd = gru_weights(w, "encoder/rnn/forward_layer/cell")
        bwd = gru_weights(w, "encoder/rnn/backward_layer/cell")
        self.units = fwd["weight_hh"].shape[1]
        self.rnn = nn.GRU(table.shape[1], self.units, batch_first=True, bidirectional=True)
        state = {f"{k}_l0": v for k, v in fwd.items()}
        state |= {f"{k}_l0_reverse": v for k, v in bwd.items()}
        self.rnn.load_state_dict(state)

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        out, _ = self.rnn(self.embedding(src))
        memory = out[..., : self.units] + out[..., self.units :]
        return memory, torch.zeros_like(memory[:, 0])


class TextDecoder(nn.Module):
    """One step of the tutorial's ``Decoder``: ``forward(token (B,1), hidden (B,U), memory
    (B,S,U)) -> (logits (B,V), hidden (B,U), attention (B,S))``."""

    def __init__(self, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        table = torch.from_numpy(w["decoder/embedding/embeddings"])
        self.embedding = nn.Embedding.from_pretrained(table, freeze=True)
        gru = gru_weights(w, "decoder/rnn/cell")
        units = gru["weight_hh"].shape[1]
        self.rnn = nn.GRUCell(table.shape[1], units)
        self.rnn.load_state_dict(gru)
        # EinsumDense kernels: query/key/value (U, heads=1, key_dim), output (1, key_dim, U)
        for part in ("query", "key", "value", "output"):
            kernel, bias = w[f"{MHA}/_{part}_dense/kernel"], w[f"{MHA}/_{part}_dense/bias"]
            if (kernel.shape[1] if part != "output" else kernel.shape[0]) != 1:
                raise KerasError(f"{MHA}: {kernel.shape} weights: one attention head only")
            kernel = kernel[:, 0, :] if part != "output" else kernel[0]
            setattr(self, part, dense_from(kernel, bias.reshape(-1)))
        self.scale = 1.0 / math.sqrt(self.query.out_features)
        self.norm = nn.LayerNorm(units, eps=LAYERNORM_EPSILON)
        self.norm.load_state_dict(
            {
                "weight": torch.from_numpy(w["decoder/attention/layernorm/gamma"]),
                "bias": torch.from_numpy(w["decoder/attention/layernorm/beta"]),
            }
        )
        self.out = dense_from(w["decoder/output_layer/kernel"], w["decoder/output_layer/bias"])

    def forward(self, token: Tensor, hidden: Tensor, memory: Tensor) -> tuple[Tensor, ...]:
        state = self.rnn(self.embedding(token)[:, 0], hidden)
        query = self.query(state) * self.scale
        scores = torch.bmm(self.key(memory), query.unsqueeze(2)).squeeze(2)  # (B,S)
        weights = torch.softmax(scores, dim=1)
        context = self.output(weighted_sum(weights, self.value(memory)))
        return self.out(self.norm(state + context)), state, weights


def _vocabulary(path: Path, side: str, rows: int) -> list[str]:
    try:
        tokens = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KerasError(f"{side} vocabulary: {path} not found") from None
    except ValueError as exc:
        raise KerasError(f"{side} vocabulary {path}: not JSON ({exc})") from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise KerasError(
            f"{side} vocabulary {path}: expected the JSON list get_vocabulary() returns"
        )
    if tokens[:2] != [MASK, UNK] or START not in tokens or END not in tokens:
        raise KerasError(
            f"{side} vocabulary {path}: not a TextVectorization vocabulary of the tutorial "
            f"('', '[UNK]' first, [START] and [END] in it); got {tokens[:4]}"
        )
    if len(tokens) != rows:
        raise KerasError(
            f"the {side} embeddings have {rows} rows but {path} lists {len(tokens)} "
            f"tokens: is it this model's {side} vocabulary?"
        )
    return [PAD, *tokens[1:]]


def _tokenizer(tokens: list[str], source: bool) -> WordTokenizer:
    marks = {"start_tokens": [START], "end_tokens": [END]} if source else {}
    return WordTokenizer(
        tokens, unk_id=1, unicode_form="NFKD", split_punctuation=False,
        keep_only=KEEP_ONLY, split_off=SPLIT_OFF, **marks,
    )  # fmt: skip


def _model_weights(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``w`` by the Translator's own paths: ``tf.train.Checkpoint(model=model)`` puts
    them under ``model/``, beside the compiled model's optimizer and metrics."""
    if any(n.startswith("encoder/") for n in w) or not any(
        n.startswith("model/encoder/") for n in w
    ):
        return w
    return {
        n[len("model/") :]: v
        for n, v in w.items()
        if n.startswith("model/") and not n.startswith(("model/optimizer/", "model/keras_api/"))
    }


def keras_text_user_model(
    checkpoint: Path, source_vocabulary: Path, target_vocabulary: Path
) -> UserModel:
    """Load and validate a model of the newer tutorial; its modules and declaration."""
    try:
        w = _model_weights(variable_values(read_checkpoint(checkpoint)))
    except CheckpointError as exc:
        raise KerasError(str(exc)) from None
    missing = [n for n in WEIGHTS if n not in w]
    if missing:
        if any(n.startswith("model/variables/") for n in w):
            hint = (
                "a SavedModel's variables are numbered, not named, and its vocabularies live "
                "in its graph: convert what model.save_weights(prefix) wrote"
            )
        elif "decoder/gru/cell/kernel" in w:
            hint = "a model of the older tutorial: convert it with nmt-convert keras"
        else:
            hint = "the converter reads the attribute names the tutorial gives"
        raise KerasError(
            f"{checkpoint}: not the newer tutorial's Translator: no {missing[0]} "
            f"({len(missing)} of its {len(WEIGHTS)} weights missing; found {sorted(w)[:6]}); "
            + hint
        )
    extra = sorted(set(w) - set(WEIGHTS))
    if extra:
        raise KerasError(f"{checkpoint}: weights the tutorial's model has not: {extra[:6]}")
    src = _vocabulary(source_vocabulary, "source", w["encoder/embedding/embeddings"].shape[0])
    tgt = _vocabulary(target_vocabulary, "target", w["decoder/embedding/embeddings"].shape[0])
    try:
        encoder, decoder = TextEncoder(w).eval(), TextDecoder(w).eval()
        source, target = _tokenizer(src, True), _tokenizer(tgt, False)
    except (RuntimeError, ValueError) as exc:  # shapes that do not fit together
        raise KerasError(
            f"{checkpoint}: weights that do not fit the tutorial's model: {first_line(exc)}"
        ) from None
    except TokenizerError as exc:
        raise KerasError(str(exc)) from None
    ids = {"pad": 0, "unk": 1, "bos": tgt.index(START), "eos": tgt.index(END)}
    signature = Signature(
        encoder_args=("src",),
        hidden_layout="flat",
        decoder_args=("token", "hidden", "memory"),
        decoder_returns=("logits", "hidden", "attention"),
    )
    origin = {
        "converter": "keras-text",
        "checkpoint": str(checkpoint),
        "source_vocabulary": str(source_vocabulary),
        "target_vocabulary": str(target_vocabulary),
    }
    return UserModel(encoder, decoder, source, target, ids, signature, origin=origin,
                     decoding=loop_decoding(MAX_LENGTH))  # fmt: skip
