"""TensorFlow's newer tutorial models: ``nmt-convert keras-text translator/ --out DIR`` (the
SavedModel the tutorial exports), or ``nmt-convert keras-text weights/ --source-vocabulary
context.json --target-vocabulary target.json --out DIR``.

The model the current version of TensorFlow's tutorial *Neural machine translation with
attention* (2022 on: ``TextVectorization``, ``tensorflow_text``) trains: an ``Encoder``
(Embedding with ``mask_zero`` + a bidirectional GRU whose directions are summed), a
``CrossAttention`` (one-head ``MultiHeadAttention`` of the decoder's GRU output over the
encoder's, added back and layer-normalised) and a ``Decoder`` (Embedding, GRU carrying its
state, the cross attention, a Dense output), read without TensorFlow
(:mod:`export.tf_checkpoint`, :mod:`export.tf_saved_model`) from the SavedModel
``tf.saved_model.save(Export(model), 'translator')`` writes at the tutorial's end (its
variables by layer path; the vocabularies from its graph's lookup tables), or from what
``model.save_weights`` wrote plus the two vocabularies (``processor.get_vocabulary()`` as
JSON: such a checkpoint does not hold them).

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

from export.keras import KerasError, dense_from, gru_weights, keras2_names, loop_decoding
from export.modules import first_line
from export.signature import Signature
from export.tf_checkpoint import CheckpointError
from export.tf_saved_model import SavedModelGraph, named_variables
from export.user import UserModel
from models.attention import weighted_sum
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
    """``forward(src (B,S)) -> (memory (B,S,M), hidden (B,U))``: the bidirectional GRU's
    two directions summed (the tutorial's ``merge_mode='sum'``, M = U) or side by side
    (Keras' default ``'concat'``, M = 2U: told by the attention's key weights, which
    read M); the decoder starts from zeros (``get_initial_state``), returned as
    ``hidden``."""

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
        width = w[f"{MHA}/_key_dense/kernel"].shape[0]  # what the attention reads
        if width not in (self.units, 2 * self.units):
            raise KerasError(
                f"{MHA}: keys read {width} features, neither the encoder's {self.units} "
                f"(merge_mode='sum') nor {2 * self.units} ('concat'): only those are supported"
            )
        self.concat = width == 2 * self.units

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        out, _ = self.rnn(self.embedding(src))
        forward, backward = out[..., : self.units], out[..., self.units :]
        memory = out if self.concat else forward + backward  # (torch: forward first)
        return memory, torch.zeros_like(forward[:, 0])


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


def _json_vocabulary(path: Path, side: str) -> list[str]:
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
    return tokens


def _graph_vocabulary(graph: SavedModelGraph, path: str, side: str) -> list[str]:
    """The ``get_vocabulary()`` list of the lookup table at ``path``: the table maps the
    words from id 2 on; id 0 (the mask, ``''``) and 1 (``[UNK]``) are implicit."""
    try:
        table = graph.table(path)
    except CheckpointError as exc:
        raise KerasError(f"the {side} vocabulary: {exc}") from None
    if table is None:
        raise KerasError(
            f"{graph.directory}: no {side} vocabulary (no lookup table at {path}): not a "
            "SavedModel of the tutorial's Translator; give --source-vocabulary and "
            "--target-vocabulary"
        )
    tokens: list[str | None] = [MASK, UNK] + [None] * len(table)
    for word, i in table.items():
        if not 2 <= i < len(tokens) or tokens[i] is not None:
            raise KerasError(
                f"{graph.directory}: the {side} vocabulary's table maps {word!r} to id {i}: "
                f"not a TextVectorization vocabulary of ids 2..{len(tokens) - 1}"
            )
        tokens[i] = word
    return tokens  # type: ignore[return-value]


def _vocabulary(tokens: list[str], where: object, side: str, rows: int) -> list[str]:
    if tokens[:2] != [MASK, UNK] or START not in tokens or END not in tokens:
        raise KerasError(
            f"{side} vocabulary {where}: not a TextVectorization vocabulary of the tutorial "
            f"('', '[UNK]' first, [START] and [END] in it); got {tokens[:4]}"
        )
    if len(tokens) != rows:
        raise KerasError(
            f"the {side} embeddings have {rows} rows but {where} lists {len(tokens)} "
            f"tokens: is it this model's {side} vocabulary?"
        )
    return [PAD, *tokens[1:]]


def _vocabularies(
    graph: SavedModelGraph | None, given: list[Path | None], root: str
) -> list[tuple[list[str], object]]:
    """The source and target ``get_vocabulary()`` lists with where each came from: the
    JSON files given, else the SavedModel's tables (the encoder's ``TextVectorization``;
    the decoder's ``id_to_word``, what ``translate`` spells its output with). A file given
    beside a SavedModel must list what its table holds."""
    out = []
    tables = (f"{root}encoder/text_processor/_lookup_layer/lookup_table",
              f"{root}decoder/id_to_word/lookup_table")  # fmt: skip
    for side, path, table in zip(("source", "target"), given, tables, strict=True):
        tokens = _json_vocabulary(path, side) if path is not None else None
        found = None
        if graph is not None:
            try:
                found = _graph_vocabulary(graph, table, side)
            except KerasError:
                if tokens is None:
                    raise
                # a table this reader cannot read (from an asset file, elsewhere): the file
                # given is the vocabulary
        if found is not None:
            if tokens is not None and tokens != found:
                pairs = enumerate(zip(tokens, found, strict=False))
                first = next((i for i, (a, b) in pairs if a != b), min(len(tokens), len(found)))
                raise KerasError(
                    f"{side} vocabulary {path} differs from the SavedModel's at id {first} "
                    f"({len(tokens)} and {len(found)} tokens): leave the option out to use "
                    "the SavedModel's"
                )
            out.append((found, graph.directory / "saved_model.pb"))
        elif tokens is None:
            raise KerasError(
                f"no {side} vocabulary: model.save_weights does not save the vocabularies; "
                f"give --{side}-vocabulary (get_vocabulary() as JSON), or convert the "
                "SavedModel tf.saved_model.save wrote, which holds them"
            )
        else:
            out.append((tokens, path))
    return out


def _tokenizer(tokens: list[str], source: bool) -> WordTokenizer:
    marks = {"start_tokens": [START], "end_tokens": [END]} if source else {}
    return WordTokenizer(
        tokens, unk_id=1, unicode_form="NFKD", split_punctuation=False,
        keep_only=KEEP_ONLY, split_off=SPLIT_OFF, **marks,
    )  # fmt: skip


def _model_root(w: dict[str, np.ndarray]) -> str:
    """Where the Translator lies in the saved object: at the root (``model.save_weights``)
    or under an attribute (``tf.train.Checkpoint(model=model)``; the tutorial's ``Export``
    module, which ``tf.saved_model.save`` writes, keeps it as ``model``): the path before
    its encoder's embedding. Two Translators in one save are refused, naming them."""
    roots = sorted(
        n[: -len(WEIGHTS[0])] for n in w if n == WEIGHTS[0] or n.endswith("/" + WEIGHTS[0])
    )
    if len(roots) > 1:
        raise KerasError(
            f"the checkpoint holds {len(roots)} Translators "
            f"({', '.join(r or '/' for r in roots)}): save the one to convert alone"
        )
    return roots[0] if roots else ""


def _saved_model(checkpoint: Path) -> SavedModelGraph | None:
    """The SavedModel ``checkpoint`` is (its directory, its ``variables/`` or
    ``variables/variables``), or None for a checkpoint of ``model.save_weights``."""
    for directory in (checkpoint, checkpoint.parent, checkpoint.parent.parent):
        if (directory / "saved_model.pbtxt").is_file():
            raise CheckpointError(
                f"{directory}: a SavedModel in text form (saved_model.pbtxt) is not read: "
                "give the binary saved_model.pb tf.saved_model.save writes"
            )
        if (directory / "variables").is_dir() and (directory / "saved_model.pb").is_file():
            return SavedModelGraph(directory)
    return None


def keras_text_user_model(
    checkpoint: Path,
    source_vocabulary: Path | None = None,
    target_vocabulary: Path | None = None,
) -> UserModel:
    """Load and validate a model of the newer tutorial (what ``model.save_weights`` or
    ``tf.saved_model.save`` wrote); its modules and declaration. The vocabularies come
    from the JSON files given, else from the SavedModel."""
    try:
        w = keras2_names(named_variables(checkpoint))
        graph = _saved_model(checkpoint)
    except CheckpointError as exc:
        raise KerasError(str(exc)) from None
    root = _model_root(w)
    w = {n[len(root) :]: v for n, v in w.items() if n.startswith(root)}
    missing = [n for n in WEIGHTS if n not in w]
    if missing:
        if "decoder/gru/cell/kernel" in w:
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
    (src, src_from), (tgt, tgt_from) = _vocabularies(
        graph, [source_vocabulary, target_vocabulary], root
    )
    src = _vocabulary(src, src_from, "source", w["encoder/embedding/embeddings"].shape[0])
    tgt = _vocabulary(tgt, tgt_from, "target", w["decoder/embedding/embeddings"].shape[0])
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
    origin = {"converter": "keras-text", "checkpoint": str(checkpoint),
              "source_vocabulary": str(src_from), "target_vocabulary": str(tgt_from)}  # fmt: skip
    return UserModel(encoder, decoder, source, target, ids, signature, origin=origin,
                     decoding=loop_decoding(MAX_LENGTH))  # fmt: skip
