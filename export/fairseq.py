"""fairseq LSTM models: ``nmt-convert fairseq CHECKPOINT --out DIR``.

Load -> validate -> declare, as the other converters: the checkpoint ``fairseq-train``
wrote (a ``torch.save`` dict read with ``weights_only=True``, only ``argparse.Namespace``
allowed besides tensors: no fairseq import, no pickled code run) and the dictionaries
``fairseq-preprocess`` wrote (``dict.SRC.txt``, ``dict.TGT.txt``) become two modules that
compute what fairseq's ``LSTMEncoder`` + ``LSTMDecoder`` (``fairseq/models/lstm.py``,
architectures ``lstm``, ``lstm_wiseman_iwslt_de_en``, ``lstm_luong_wmt_en_de``) compute at
inference time; every option they cannot express is refused by name.

What fairseq does that the bundle reproduces (``fairseq-interactive``, one sentence a
batch):

* the source is split on whitespace, ``</s>`` appended; ``--bpe subword_nmt`` /
  ``--bpe sentencepiece`` given here as to ``fairseq-interactive`` apply first, and are
  undone on the output as fairseq's ``bpe.decode`` does;
* decoding starts from ``</s>`` (fairseq feeds EOS as the first target token): the bundle
  starts from ``<s>``, which the step embeds as ``</s>``;
* the beam search of ``SequenceGenerator``: ``2 x beam`` candidates, an EOS among the
  first ``beam`` finishes a hypothesis until ``beam`` have, scores ``log_prob / (length
  incl. EOS) ** lenpen`` (greedy is beam 1, normalised alike); at most ``min(max_len_a x
  source tokens (EOS counted) + max_len_b, max_target_positions - 1)`` tokens before EOS,
  EOS forced after them; no EOS before ``min_len`` tokens.
"""

from __future__ import annotations

import argparse
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from export.modules import first_line, linear_from
from export.signature import Signature
from export.user import UserModel
from export.writer import ExportError
from models.attention import weighted_sum
from models.bpe import BpeTokenizer
from models.pieces import PieceTokenizer
from models.tokenizer import TokenizerError
from models.words import WordTokenizer

# fairseq's Dictionary: these four first, then the lines of dict.LANG.txt
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
ARCHS = ("lstm", "lstm_wiseman_iwslt_de_en", "lstm_luong_wmt_en_de")
# fairseq-interactive's generation defaults (fairseq/dataclass/configs.py GenerationConfig)
GENERATION = {"lenpen": 1.0, "max_len_a": 0.0, "max_len_b": 200, "min_len": 1}


class FairseqError(ExportError, ValueError):
    """A fairseq checkpoint that cannot be read or that uses an option the bundle lacks (an
    :class:`~export.writer.ExportError`: ``nmt-convert`` prints it in one line)."""


class FairseqEncoder(nn.Module):
    """fairseq's ``LSTMEncoder`` and the start of ``LSTMDecoder.extract_features``.

    ``forward(src (B,S) int64, lengths (B,)) -> (memory (B,S,D), (h, c))``, ``D`` the
    encoder's output units (2 x hidden when bidirectional), ``h``/``c`` the decoder's first
    state ``(layers,B,Hd)``: each layer's final states (a bidirectional layer's two
    directions concatenated), through ``encoder_hidden_proj`` / ``encoder_cell_proj`` when
    the sizes differ. Packed, so a sentence's states do not depend on its batch mates.
    """

    def __init__(
        self, embed: nn.Embedding, lstm: nn.LSTM, proj: nn.ModuleDict | None = None
    ) -> None:
        super().__init__()
        self.embed, self.lstm, self.proj = embed, lstm, proj

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        packed = pack_padded_sequence(
            self.embed(src), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        out, (h, c) = self.lstm(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        h, c = self._layers(h), self._layers(c)
        if self.proj is not None:
            h, c = self.proj["hidden"](h), self.proj["cell"](c)
        return memory, (h, c)

    def _layers(self, final: Tensor) -> Tensor:
        """``(layers*dirs,B,H)`` -> ``(layers,B,dirs*H)`` (fairseq's ``combine_bidir``)."""
        if not self.lstm.bidirectional:
            return final
        layers, batch = self.lstm.num_layers, final.shape[1]
        return final.view(layers, 2, batch, -1).transpose(1, 2).reshape(layers, batch, -1)


class FairseqStep(nn.Module):
    """One step of fairseq's ``LSTMDecoder`` (with attention, so input feeding) and its
    output layer.

    ``forward(token (B,), hidden (h, c) (layers,B,H), memory (B,S,D), mask (B,S) bool,
    feed (B,H)) -> (logits (B,V), hidden, attention (B,S), feed)``. ``feed`` is fairseq's
    ``input_feed`` (zeros at the first step). ``token`` ``bos`` is embedded as ``eos``:
    fairseq's first target token is ``</s>``.
    """

    def __init__(
        self,
        embed: nn.Embedding,
        cells: nn.ModuleList,
        layers: nn.ModuleDict,
        bos: int,
        eos: int,
    ) -> None:
        super().__init__()
        self.embed, self.cells, self.layers = embed, cells, layers
        self.bos, self.eos = bos, eos

    def forward(self, token: Tensor, hidden: tuple[Tensor, Tensor], memory: Tensor, mask: Tensor,
                feed: Tensor):  # fmt: skip
        token = torch.where(token == self.bos, torch.full_like(token, self.eos), token)
        x = torch.cat([self.embed(token), feed], dim=1)
        hs, cs = [], []
        for i, cell in enumerate(self.cells):
            h, c = cell(x, (hidden[0][i], hidden[1][i]))
            hs.append(h)
            cs.append(c)
            x = h
        query = self.layers["input_proj"](x)  # (B,D)
        scores = (memory * query.unsqueeze(1)).sum(dim=2)  # (B,S)
        scores = scores.masked_fill(~mask, float("-inf"))
        attention = torch.softmax(scores, dim=1)
        context = weighted_sum(attention, memory)  # the same whatever the batch
        out = torch.tanh(self.layers["output_proj"](torch.cat([context, x], dim=1)))
        feed = out
        if "additional_fc" in self.layers:
            out = self.layers["additional_fc"](out)
        if "fc_out" in self.layers:
            logits = self.layers["fc_out"](out)
        else:  # share_decoder_input_output_embed
            logits = out @ self.embed.weight.t()
        return logits, (torch.stack(hs), torch.stack(cs)), attention, feed


@dataclass
class Checkpoint:
    """What the converter reads of a fairseq checkpoint."""

    path: Path
    model: dict[str, Any]  # the model's options (cfg.model, or the legacy args)
    task: dict[str, Any]
    criterion: str
    weights: dict[str, Tensor]

    @classmethod
    def read(cls, path: Path) -> Checkpoint:
        try:
            with torch.serialization.safe_globals([argparse.Namespace]):
                ckpt = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise FairseqError(f"checkpoint not found: {path}") from None
        except Exception as exc:  # a file torch cannot read, or one holding code
            if path.is_file() and not zipfile.is_zipfile(path):
                raise FairseqError(
                    f"{path}: not a fairseq checkpoint (a .pt fairseq-train wrote): not a torch "
                    "file, or one cut short"
                ) from None
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:200]
            raise FairseqError(f"{path}: not a readable fairseq checkpoint ({first})") from None
        if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
            raise FairseqError(
                f"{path} holds no model weights: give the checkpoint fairseq-train wrote"
            )
        cfg = ckpt.get("cfg") if isinstance(ckpt.get("cfg"), dict) else None
        args = ckpt.get("args")
        if cfg is not None and cfg.get("model") is not None:
            model, task = _options(cfg["model"]), _options(cfg.get("task"))
            criterion = _options(cfg.get("criterion")).get("_name") or model.get("criterion")
        elif args is not None:  # fairseq < 0.10: one Namespace for everything
            model = _options(args)
            task, criterion = model | {"_name": model.get("task")}, model.get("criterion")
        else:
            raise FairseqError(f"{path} holds no model options (neither cfg nor args)")
        # a model trained with --fp16 is saved in half precision: the bundle computes in
        # float32 (its int8/fp16 variants are made from that)
        weights = {k: v.float() if isinstance(v, Tensor) and v.is_floating_point() else v
                   for k, v in ckpt["model"].items()}  # fmt: skip
        return cls(path, model, task, str(criterion or ""), weights)


def _options(node: Any) -> dict[str, Any]:
    if node is None:
        return {}
    if isinstance(node, argparse.Namespace):
        return vars(node)
    if isinstance(node, dict):
        return node
    raise FairseqError(f"model options of type {type(node).__name__}: not a fairseq checkpoint")


def _refuse(what: str, value: Any, supported: str) -> FairseqError:
    return FairseqError(f"{what}: {value!r} is not supported (supported: {supported})")


def check_options(ckpt: Checkpoint) -> None:
    """Refuse, by name, what the modules above do not compute."""
    m = ckpt.model
    arch = m.get("arch") or m.get("_name")
    if arch not in ARCHS:
        raise _refuse("arch", arch, ", ".join(ARCHS) + " (fairseq's LSTM encoder-decoder)")
    if str(m.get("decoder_attention", "1")).lower() in ("0", "false", "none"):
        raise _refuse("--decoder-attention", m.get("decoder_attention"), "1 (attention)")
    if ckpt.criterion == "adaptive_loss" or any("adaptive_softmax" in k for k in ckpt.weights):
        raise _refuse("adaptive softmax (--criterion adaptive_loss)", True, "a full softmax")
    if ckpt.task.get("_name", "translation") not in ("translation", None):
        raise _refuse("--task", ckpt.task.get("_name"), "translation")


def build_modules(
    w: dict[str, Tensor], pad: int, bos: int, eos: int
) -> tuple[FairseqEncoder, FairseqStep]:
    """The encoder and step modules, their sizes read off the weights."""
    src_embed = nn.Embedding.from_pretrained(
        w["encoder.embed_tokens.weight"], freeze=True, padding_idx=pad
    )
    bidirectional = "encoder.lstm.weight_ih_l0_reverse" in w
    layers = sum(1 for k in w if k.startswith("encoder.lstm.weight_ih_l") and "reverse" not in k)
    w_ih = w["encoder.lstm.weight_ih_l0"]
    lstm = nn.LSTM(w_ih.shape[1], w_ih.shape[0] // 4, layers, batch_first=True,
                   bidirectional=bidirectional)  # fmt: skip
    lstm.load_state_dict({k[len("encoder.lstm.") :]: v for k, v in w.items()
                          if k.startswith("encoder.lstm.")})  # fmt: skip
    proj = None
    if "decoder.encoder_hidden_proj.weight" in w:
        proj = nn.ModuleDict({"hidden": linear_from(w, "decoder.encoder_hidden_proj"),
                              "cell": linear_from(w, "decoder.encoder_cell_proj")})  # fmt: skip
    encoder = FairseqEncoder(src_embed, lstm.eval(), proj)

    tgt_embed = nn.Embedding.from_pretrained(
        w["decoder.embed_tokens.weight"], freeze=True, padding_idx=pad
    )
    cells = nn.ModuleList()
    for i in range(
        sum(1 for k in w if k.startswith("decoder.layers.") and k.endswith(".weight_ih"))
    ):
        ih = w[f"decoder.layers.{i}.weight_ih"]
        cell = nn.LSTMCell(ih.shape[1], ih.shape[0] // 4)
        cell.load_state_dict({k.rsplit(".", 1)[1]: v for k, v in w.items()
                              if k.startswith(f"decoder.layers.{i}.")})  # fmt: skip
        cells.append(cell)
    if len(cells) != layers:
        raise FairseqError(
            f"{layers} encoder layers but {len(cells)} decoder layers (fairseq needs them equal)"
        )
    names = ["input_proj", "output_proj"]
    parts = {n: linear_from(w, f"decoder.attention.{n}") for n in names}
    for name in ("additional_fc", "fc_out"):
        if f"decoder.{name}.weight" in w:
            parts[name] = linear_from(w, f"decoder.{name}")
    step = FairseqStep(tgt_embed, cells, nn.ModuleDict(parts), bos, eos)
    return encoder.eval(), step.eval()


def read_dictionary(path: Path) -> list[str]:
    """A fairseq ``dict.LANG.txt`` as the model's tokens by id: ``<s> <pad> </s> <unk>``,
    then one ``TOKEN COUNT [#fairseq:overwrite]`` line each (fairseq's ``Dictionary``)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise FairseqError(f"dictionary {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FairseqError(f"dictionary {path}: not UTF-8 text") from None
    tokens, seen = list(SPECIALS), set(SPECIALS)
    for number, line in enumerate(lines, 1):
        word, _, field = line.rstrip().rpartition(" ")
        overwrite = field == "#fairseq:overwrite"
        if overwrite:
            word, _, field = word.rpartition(" ")
        if not word or not field.lstrip("-").isdigit():
            raise FairseqError(f"dictionary {path} line {number}: {line!r} is not 'TOKEN COUNT'")
        if word in seen and not overwrite:
            raise FairseqError(f"dictionary {path} line {number}: duplicate token {word!r}")
        seen.add(word)
        tokens.append(word)
    return tokens


def languages(
    ckpt: Checkpoint, data: Path, source: str | None, target: str | None
) -> tuple[str, str]:
    """The language pair: given, else the checkpoint's task, else (as fairseq infers it)
    from a ``*.SRC-TGT.*`` file name in ``data``."""
    source = source or ckpt.task.get("source_lang")
    target = target or ckpt.task.get("target_lang")
    if not (source and target) and data.is_dir():
        for name in sorted(p.name for p in data.iterdir()):
            parts = name.split(".")
            if len(parts) >= 3 and len(parts[1].split("-")) == 2:
                source, target = (
                    (source or parts[1].split("-")[0]),
                    (target or parts[1].split("-")[1]),
                )
                break
    if not data.is_dir():
        raise FairseqError(
            f"data directory {data} not found: --data names the directory fairseq-preprocess "
            "wrote (its dict.SRC.txt and dict.TGT.txt)"
        )
    if not (source and target):
        found = sorted(p.name for p in data.glob("dict.*.txt"))
        if not found:
            raise FairseqError(
                f"no dictionaries (dict.*.txt) in {data}: pass --data, the directory "
                "fairseq-preprocess wrote (its --destdir; the default is the checkpoint's)"
            )
        raise FairseqError(
            f"which language is the source? give --source-lang and --target-lang "
            f"(dictionaries in {data}: {', '.join(found)})"
        )
    return str(source), str(target)


def _tokenizer(tokens: list[str], side: str, bpe: str | None, bpe_model: Path | None):
    unk, end = SPECIALS.index("<unk>"), (["</s>"] if side == "source" else [])
    try:
        if bpe is None:
            return WordTokenizer(tokens, unk_id=unk, lowercase=False, split_punctuation=False,
                                 end_tokens=end)  # fmt: skip
        if bpe == "subword_nmt":
            return BpeTokenizer(tokens, unk_id=unk, codes_file=bpe_model, end_tokens=end)
        return PieceTokenizer(bpe_model.read_bytes(), tokens, unk_id=unk, end_tokens=end,
                              strip=True)  # fmt: skip
    except OSError as exc:
        raise FairseqError(f"--bpe {bpe}: {bpe_model}: {exc.strerror or exc}") from None
    except TokenizerError as exc:
        raise FairseqError(f"--bpe {bpe}: {exc}") from None


def decoding(ckpt: Checkpoint, generation: dict[str, Any]) -> dict[str, Any]:
    """fairseq's generation rules as the bundle's decoding defaults (module docstring):
    ``max_len_a``/``max_len_b`` count tokens before EOS, our limit counts the EOS."""
    g = GENERATION | {k: v for k, v in generation.items() if v is not None}
    if g["max_len_a"] < 0 or g["max_len_b"] < 0 or g["min_len"] < 0:
        raise FairseqError("--max-len-a, --max-len-b and --min-len must be >= 0")
    if g["max_len_a"] == 0 and g["max_len_b"] == 0:
        raise FairseqError("--max-len-a 0 --max-len-b 0 leaves no target tokens: raise one")
    positions = int(float(ckpt.model.get("max_target_positions") or 1e5))
    return {
        "max_length": positions,  # (max_target_positions - 1) tokens + EOS
        "max_length_ratio": float(g["max_len_a"]),
        "max_length_offset": int(g["max_len_b"]) + 1,
        "min_length": int(g["min_len"]),
        "length_penalty": float(g["lenpen"]),
        "search": "fairseq",
    }


def fairseq_user_model(
    checkpoint: Path,
    *,
    data: Path | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
    bpe: str | None = None,
    bpe_model: Path | None = None,
    generation: dict[str, Any] | None = None,
) -> UserModel:
    """Load and validate a fairseq LSTM checkpoint; its modules with their declaration.

    ``data``: the directory holding ``dict.SRC.txt`` and ``dict.TGT.txt`` (default: the
    checkpoint's own directory, as in fairseq's model archives); ``bpe``: ``subword_nmt``
    or ``sentencepiece`` with ``bpe_model`` (the codes or the ``.model``), as given to
    ``fairseq-interactive``; ``generation``: ``lenpen``, ``max_len_a``, ``max_len_b``,
    ``min_len`` when not fairseq's defaults."""
    if bpe not in (None, "subword_nmt", "sentencepiece"):
        raise _refuse("--bpe", bpe, "subword_nmt, sentencepiece (or none: whitespace tokens)")
    if (bpe is None) != (bpe_model is None):
        raise FairseqError(
            "--bpe subword_nmt needs --bpe-codes, --bpe sentencepiece --sentencepiece-model"
            if bpe
            else "--bpe-codes / --sentencepiece-model need --bpe"
        )
    ckpt = Checkpoint.read(checkpoint)
    check_options(ckpt)
    data = data or checkpoint.parent
    src, tgt = languages(ckpt, data, source_lang, target_lang)
    vocabs = [read_dictionary(data / f"dict.{lang}.txt") for lang in (src, tgt)]
    ids = {"pad": 1, "unk": 3, "bos": 0, "eos": 2}
    try:
        encoder, step = build_modules(ckpt.weights, ids["pad"], ids["bos"], ids["eos"])
    except KeyError as exc:
        raise FairseqError(
            f"{checkpoint}: weight {exc} missing: not a fairseq LSTM checkpoint"
        ) from None
    except (RuntimeError, ValueError, TypeError) as exc:  # shapes, values
        raise FairseqError(
            f"{checkpoint}: weights do not fit an LSTM model: {first_line(exc)}"
        ) from None
    for side, lang, tokens, embed in (("source", src, vocabs[0], encoder.embed),
                                      ("target", tgt, vocabs[1], step.embed)):  # fmt: skip
        if len(tokens) != embed.num_embeddings:
            raise FairseqError(
                f"dict.{lang}.txt gives {len(tokens)} {side} tokens but the checkpoint's "
                f"{side} embeddings have {embed.num_embeddings} rows: is it this model's "
                "dictionary?"
            )
    source = _tokenizer(vocabs[0], "source", bpe, bpe_model)
    target = _tokenizer(vocabs[1], "target", bpe, bpe_model)
    signature = Signature(
        encoder_args=("src", "lengths"),
        rnn="lstm",
        decoder_args=("token", "hidden", "memory", "mask", "feed"),
        token_shape="B",
        decoder_returns=("logits", "hidden", "attention", "feed"),
        extra_state={"feed": step.cells[-1].hidden_size},
    )
    origin = {"converter": "fairseq", "checkpoint": str(checkpoint), "data": str(data),
              "source_lang": src, "target_lang": tgt, "bpe": bpe or "none"}  # fmt: skip
    return UserModel(
        encoder, step, source, target, ids, signature, origin=origin,
        decoding=decoding(ckpt, generation or {}),
    )  # fmt: skip
