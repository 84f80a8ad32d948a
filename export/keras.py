"""TensorFlow's tutorial models: ``nmt-convert keras training_checkpoints/ --source-tokenizer
inp.json --target-tokenizer targ.json --max-target-length N``.

The model the TensorFlow tutorial *Neural machine translation with attention* (TF 2.0 to
2.5, copied into countless notebooks) trains: a Keras ``Encoder`` (Embedding + GRU over
the source padded to the longest training sentence), ``BahdanauAttention`` (``V(tanh(W1
query + W2 values))``, softmax over every position, padding included) and a ``Decoder``
whose GRU starts each step from zeros (``output, state = self.gru(x)``: the state reaches
the next step only as the attention's query), as ``tf.train.Checkpoint(optimizer=...,
encoder=..., decoder=...)`` saved it, read without TensorFlow (:mod:`export.tf_checkpoint`),
plus the two ``Tokenizer.to_json()`` files. Load -> validate -> declare, as the other
converters.

What the tutorial does that the bundle reproduces:

* ``preprocess_sentence``: accents folded to ASCII, lower-cased, ``?.!,¿`` split off,
  every run of other characters but ``a-zA-Z`` a space, ``<start>``/``<end>`` around
  the source; the Keras ``Tokenizer``'s ``filters`` (characters removed) and
  ``oov_token``; without an ``oov_token`` an unknown word is left out, as
  ``texts_to_sequences`` leaves it out (the tutorial's ``evaluate`` raises KeyError);
* the source padded with id 0 to the training width (``--max-source-length``, the
  tutorial's ``max_length_inp``): its encoder runs over the padding and its attention
  attends to it, so a shorter source is padded so and the padding is part of the served
  attention; a longer one is encoded whole (``evaluate``'s ``pad_sequences`` would cut its
  first tokens off);
* greedy search (``evaluate``), at most ``max_length_targ`` tokens, ``<end>`` counted;
  ``<end>`` may come first. Beam search and everything else the server offers apply too.

A model without an ``oov_token`` has no unknown token; the bundle adds one at the end of
each vocabulary (a zero embedding, a logit of -1e4) because its contract needs one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from export.modules import first_line
from export.signature import Signature
from export.tf_checkpoint import CheckpointError
from export.tf_saved_model import named_variables
from export.user import UserModel
from export.writer import ExportError
from models.attention import weighted_sum
from models.tokenizer import TokenizerError
from models.words import WordTokenizer

# preprocess_sentence: split off these, keep these (every other run becomes a space)
SPLIT_OFF = "?.!,¿"
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
START, END, PAD, UNK = "<start>", "<end>", "<pad>", "<unk>"
# the logit of the unknown token a model without oov_token gets: never chosen, and
# exp(-1e4 - max) adds exactly 0 to a float32 softmax's sum
ABSENT_LOGIT = -1e4
# what a tf.train.Checkpoint of the tutorial's objects holds (object paths)
WEIGHTS = (
    "encoder/embedding/embeddings",
    "encoder/gru/cell/kernel",
    "encoder/gru/cell/recurrent_kernel",
    "encoder/gru/cell/bias",
    "decoder/embedding/embeddings",
    "decoder/gru/cell/kernel",
    "decoder/gru/cell/recurrent_kernel",
    "decoder/gru/cell/bias",
    "decoder/fc/kernel",
    "decoder/fc/bias",
    "decoder/attention/W1/kernel",
    "decoder/attention/W1/bias",
    "decoder/attention/W2/kernel",
    "decoder/attention/W2/bias",
    "decoder/attention/V/kernel",
    "decoder/attention/V/bias",
)


class KerasError(ExportError, ValueError):
    """A checkpoint or tokenizer that is not the tutorial's, or an option the bundle
    cannot express (an :class:`~export.writer.ExportError`: one line from nmt-convert)."""


def gru_weights(w: dict[str, np.ndarray], prefix: str) -> dict[str, Tensor]:
    """A Keras GRU cell's weights as torch's: Keras stacks the gates z, r, h along the
    last axis of ``kernel`` ``(in, 3U)`` and ``recurrent_kernel`` ``(U, 3U)``, torch
    r, z, n along the first of ``weight_ih`` ``(3U, in)``; ``reset_after=True`` (TF 2's
    default: the reset gate applied after the recurrent product, as torch does) keeps the
    input and recurrent biases apart, ``bias`` ``(2, 3U)``."""
    bias, recurrent = w[f"{prefix}/bias"], w[f"{prefix}/recurrent_kernel"]
    if recurrent.ndim == 2 and recurrent.shape[1] == 4 * recurrent.shape[0]:
        raise KerasError(
            f"{prefix}: four gates of {recurrent.shape[0]} units: an LSTM, which this "
            "converter does not read; the tutorial's layers are GRUs"
        )
    if bias.ndim != 2 or bias.shape[0] != 2:
        raise KerasError(
            f"{prefix}: bias of shape {bias.shape}: a GRU with reset_after=False (TF 1's "
            "default) is not supported; the tutorial's GRU (TF 2) has reset_after=True"
        )

    def torch_order(a: np.ndarray) -> Tensor:
        z, r, h = np.split(a, 3, axis=-1)
        return torch.from_numpy(np.concatenate([r, z, h], axis=-1).T.copy())

    return {
        "weight_ih": torch_order(w[f"{prefix}/kernel"]),
        "weight_hh": torch_order(w[f"{prefix}/recurrent_kernel"]),
        "bias_ih": torch_order(bias[0]),
        "bias_hh": torch_order(bias[1]),
    }


def keras2_names(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Keras 3 (TensorFlow 2.16 on) saves an ``Embedding``'s table as ``_embeddings`` and a
    ``Dense``/``EinsumDense`` kernel as ``_kernel``: the names Keras 2 gives them."""
    out = {}
    for name, value in w.items():
        head, _, last = name.rpartition("/")
        if last in ("_embeddings", "_kernel"):
            name = f"{head}/{last[1:]}"
        out[name] = value
    return out


def loop_decoding(steps: int) -> dict[str, Any]:
    """The decoding defaults of both tutorials' greedy loops (``evaluate``, ``translate``):
    at most ``steps`` tokens, the end token among them and allowed from the first; a
    sentence that has not ended by then stops without it (our limit counts the EOS that
    loop does not)."""
    return {
        "max_length": steps + 1,
        "max_length_ratio": 0.0,
        "max_length_offset": steps + 1,
        "min_length": 0,
        "eos_at_limit": False,
    }


def dense_from(kernel: np.ndarray, bias: np.ndarray) -> nn.Linear:
    """A Keras Dense layer's ``kernel`` ``(in, out)`` and ``bias`` as an ``nn.Linear``."""
    layer = nn.Linear(kernel.shape[0], kernel.shape[1])
    layer.load_state_dict({"weight": torch.from_numpy(kernel).t(), "bias": torch.from_numpy(bias)})
    return layer


def _dense(w: dict[str, np.ndarray], prefix: str) -> nn.Linear:
    return dense_from(w[f"{prefix}/kernel"], w[f"{prefix}/bias"])


def _embedding(table: np.ndarray, extra_row: bool) -> nn.Embedding:
    if extra_row:  # the unknown token the bundle adds: never looked up
        table = np.concatenate([table, np.zeros_like(table[:1])])
    return nn.Embedding.from_pretrained(torch.from_numpy(table), freeze=True)


class TutorialEncoder(nn.Module):
    """The tutorial's ``Encoder`` from a zero state: ``forward(src (B,S)) -> (memory
    (B,S,U), hidden (B,U))``."""

    def __init__(self, w: dict[str, np.ndarray], extra_row: bool) -> None:
        super().__init__()
        self.embedding = _embedding(w["encoder/embedding/embeddings"], extra_row)
        gru = gru_weights(w, "encoder/gru/cell")
        units = gru["weight_hh"].shape[1]
        self.gru = nn.GRU(self.embedding.embedding_dim, units, batch_first=True)
        self.gru.load_state_dict({f"{k}_l0": v for k, v in gru.items()})

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        memory, hidden = self.gru(self.embedding(src))
        return memory, hidden[0]


def fed_its_state(recurrent_kernel: np.ndarray) -> bool:
    """Whether the decoder's GRU was trained fed its previous state
    (``self.gru(x, initial_state=hidden)``, a common change to the tutorial) rather than
    from zeros (the tutorial's ``self.gru(x)``). From zeros its recurrent kernel gets no
    gradient and stays as initialised: within the tutorial's ``glorot_uniform`` bound,
    sqrt(6 / (U + 3U)), or orthonormal rows (Keras' default ``orthogonal``). Trained,
    it leaves both (a fed model's measured 0.98 against its bound of 0.18)."""
    units = recurrent_kernel.shape[0]
    glorot = float(np.abs(recurrent_kernel).max()) <= np.sqrt(6.0 / (4 * units)) * (1 + 1e-5)
    gram = recurrent_kernel.astype(np.float64) @ recurrent_kernel.T.astype(np.float64)
    orthogonal = float(np.abs(gram - np.eye(units)).max()) < 1e-4
    return not (glorot or orthogonal)


class TutorialDecoder(nn.Module):
    """The tutorial's ``Decoder`` for one step: ``forward(token (B,1), hidden (B,U),
    memory (B,S,U)) -> (logits (B,V), hidden (B,U), attention (B,S))``. ``hidden`` is the
    attention's query; the GRU starts from zeros, as ``self.gru(x)`` does, unless the
    model was trained fed its state (:func:`fed_its_state`), whose GRU continues from
    ``hidden``."""

    def __init__(self, w: dict[str, np.ndarray], extra_logit: bool) -> None:
        super().__init__()
        self.fed = fed_its_state(w["decoder/gru/cell/recurrent_kernel"])
        self.embedding = _embedding(w["decoder/embedding/embeddings"], extra_logit)
        gru = gru_weights(w, "decoder/gru/cell")
        units, width = gru["weight_hh"].shape[1], gru["weight_ih"].shape[1]
        self.gru = nn.GRUCell(width, units)
        self.gru.load_state_dict(gru)
        self.w1 = _dense(w, "decoder/attention/W1")
        self.w2 = _dense(w, "decoder/attention/W2")
        self.v = _dense(w, "decoder/attention/V")
        self.fc = _dense(w, "decoder/fc")
        self.extra_logit = extra_logit

    def forward(self, token: Tensor, hidden: Tensor, memory: Tensor) -> tuple[Tensor, ...]:
        score = self.v(torch.tanh(self.w1(hidden.unsqueeze(1)) + self.w2(memory)))  # (B,S,1)
        weights = torch.softmax(score, dim=1).squeeze(2)
        context = weighted_sum(weights, memory)
        x = torch.cat([context, self.embedding(token)[:, 0]], dim=-1)
        state = self.gru(x, hidden if self.fed else torch.zeros_like(hidden))
        logits = self.fc(state)
        if self.extra_logit:
            logits = torch.cat([logits, torch.full_like(logits[:, :1], ABSENT_LOGIT)], dim=1)
        return logits, state, weights


@dataclass(frozen=True)
class KerasVocabulary:
    """A Keras ``Tokenizer``'s JSON (``Tokenizer.to_json()``): tokens by id (``<pad>`` at
    0, as Keras reserves it), its unknown token's id and whether it has one of its own."""

    tokens: list[str]
    unk_id: int
    own_unk: bool
    filters: str

    @classmethod
    def read(cls, path: Path, side: str, rows: int) -> KerasVocabulary:
        """``rows``: the embedding's (the model's vocabulary size)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            config = data["config"]
            index_word = config["index_word"]
            index_word = json.loads(index_word) if isinstance(index_word, str) else index_word
        except FileNotFoundError:
            raise KerasError(f"{side} tokenizer: {path} not found") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise KerasError(
                f"{side} tokenizer {path}: not a Keras Tokenizer.to_json() file ({exc!r})"
            ) from None
        if data.get("class_name") != "Tokenizer":
            raise KerasError(f"{side} tokenizer {path}: class_name is not 'Tokenizer'")
        for key, want in (("char_level", False), ("split", " "), ("num_words", None)):
            if config.get(key, want) != want:
                raise KerasError(
                    f"{side} tokenizer: {key}={config[key]!r} is not supported "
                    f"(the tutorial's Tokenizer has {key}={want!r})"
                )
        filters = config.get("filters", "")
        words = {int(i): w for i, w in index_word.items()}
        # the tutorial sizes its embeddings len(word_index) + 1: one row a word and 0
        if sorted(words) != list(range(1, rows)):
            raise KerasError(
                f"the {side} embeddings have {rows} rows but {path} numbers "
                f"{len(words)} words: is it this model's {side} tokenizer?"
            )
        tokens = [PAD] + [words[i] for i in range(1, rows)]
        oov = config.get("oov_token")
        for mark in (START, END):
            if mark not in tokens:
                raise KerasError(f"{side} tokenizer: no {mark} (the tutorial adds it)")
        if oov is not None:
            if (tokens.index(oov) if oov in tokens else -1) != 1:
                raise KerasError(f"{side} tokenizer: oov_token {oov!r} is not word 1")
            return cls(tokens, 1, True, filters)
        return cls([*tokens, UNK], len(tokens), False, filters)

    def tokenizer(self, source: bool, width: int) -> WordTokenizer:
        keep = "".join(c for c in LETTERS + SPLIT_OFF if c not in self.filters)
        marks = {"start_tokens": [START], "end_tokens": [END]} if source else {}
        pad = {"pad_to": width, "pad_token": PAD} if source and width else {}
        return WordTokenizer(
            self.tokens,
            unk_id=self.unk_id,
            fold_accents=True,
            split_punctuation=False,
            split_off="".join(c for c in SPLIT_OFF if c in keep),
            keep=keep,
            # a target word the model does not know scores as the added unk (-1e4 a
            # token) in Score and prefixes, not as nothing
            unknown="unk" if self.own_unk or not source else "drop",
            **marks,
            **pad,
        )


def keras_user_model(
    checkpoint: Path,
    source_tokenizer: Path,
    target_tokenizer: Path,
    *,
    max_source_length: int,
    max_target_length: int,
) -> UserModel:
    """Load and validate a tutorial model; its modules with their declaration."""
    if max_source_length < 0 or max_target_length < 1:
        raise KerasError("--max-source-length must be >= 0 and --max-target-length >= 1")
    try:
        w = keras2_names(named_variables(checkpoint))
    except CheckpointError as exc:
        raise KerasError(str(exc)) from None
    missing = [n for n in WEIGHTS if n not in w]
    if missing:
        found = sorted(w)[:12]
        raise KerasError(
            f"{checkpoint}: not the tutorial's Encoder/Decoder: no {missing[0]} "
            f"({len(missing)} of its {len(WEIGHTS)} weights missing; found {found}"
            f"{' ...' if len(w) > 12 else ''}); the converter reads the attribute names "
            "the tutorial gives (embedding, gru, fc, attention.W1/W2/V), saved together by "
            "tf.train.Checkpoint(encoder=encoder, decoder=decoder)"
        )
    # the encoder's and decoder's (an optimizer saved under another name has its own)
    extra = sorted(n for n in set(w) - set(WEIGHTS) if n.startswith(("encoder/", "decoder/")))
    if extra:
        raise KerasError(f"{checkpoint}: weights the tutorial's model has not: {extra[:6]}")
    src = KerasVocabulary.read(
        source_tokenizer, "source", w["encoder/embedding/embeddings"].shape[0]
    )
    tgt = KerasVocabulary.read(
        target_tokenizer, "target", w["decoder/embedding/embeddings"].shape[0]
    )
    if w["decoder/fc/kernel"].shape[1] != w["decoder/embedding/embeddings"].shape[0]:
        raise KerasError("decoder/fc scores another vocabulary than decoder/embedding holds")
    try:
        encoder = TutorialEncoder(w, extra_row=not src.own_unk).eval()
        decoder = TutorialDecoder(w, extra_logit=not tgt.own_unk).eval()
    except (RuntimeError, ValueError) as exc:  # shapes that do not fit together
        raise KerasError(
            f"{checkpoint}: weights that do not fit the tutorial's model: {first_line(exc)}"
        ) from None
    try:
        source = src.tokenizer(True, max_source_length)
        target = tgt.tokenizer(False, 0)
    except TokenizerError as exc:
        raise KerasError(str(exc)) from None
    ids = {
        "pad": 0,
        "unk": tgt.unk_id,
        "bos": tgt.tokens.index(START),
        "eos": tgt.tokens.index(END),
    }
    signature = Signature(
        encoder_args=("src",),
        encoder_returns=("memory", "hidden"),
        hidden_layout="flat",
        decoder_args=("token", "hidden", "memory"),
        decoder_returns=("logits", "hidden", "attention"),
    )
    origin = {
        "converter": "keras",
        "checkpoint": str(checkpoint),
        "source_tokenizer": str(source_tokenizer),
        "target_tokenizer": str(target_tokenizer),
        "max_source_length": max_source_length,
        "max_target_length": max_target_length,
    }
    return UserModel(encoder, decoder, source, target, ids, signature, origin=origin,
                     decoding=loop_decoding(max_target_length))  # fmt: skip
