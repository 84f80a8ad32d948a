"""Joey NMT (2.x) RNN models: ``nmt-convert joeynmt MODEL_DIR/config.yaml --out DIR``.

Load -> validate -> declare, as the other converters: the configuration Joey wrote
(``config.yaml``) and its checkpoint (``best.ckpt``, a plain ``torch.save`` dict read with
``weights_only=True``: no Joey import, no pickled code run) become two modules that compute
what Joey's ``RecurrentEncoder`` + ``RecurrentDecoder`` (Bahdanau or Luong attention,
input feeding, the bridge / last / zero initial state) compute at inference time, and
every option they cannot express is refused by name.

What Joey does that the bundle reproduces:

* the source ends in ``</s>`` (Joey appends EOS to every source); ``word`` level splits on
  spaces, ``bpe`` level applies SentencePiece (Joey's default) or subword-nmt codes
  restricted to the model's vocabulary, and strips SentencePiece's detokenised text;
* greedy search bans ``<s>`` and ``<pad>``, blocks EOS before ``min_output_length`` (1),
  and stops after ``max_output_length`` tokens, by default ``int(1.5 * source length)``
  (EOS counted in the source): this bundle's length rule, ``floor(1.5 * len) + 1`` with
  our EOS counted, gives the same tokens.
"""

from __future__ import annotations

import math
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
from models.bpe import BpeTokenizer
from models.pieces import PieceTokenizer
from models.tokenizer import TokenizerError
from models.words import WordTokenizer, read_vocabulary

Hidden = Tensor | tuple[Tensor, Tensor]
# Joey's default special ids (data.special_symbols.<name>_id overrides them)
SPECIAL_IDS = {"unk": 0, "pad": 1, "bos": 2, "eos": 3}


class JoeyError(ExportError, ValueError):
    """A Joey NMT model that cannot be read or that uses an option the bundle lacks (an
    :class:`~export.writer.ExportError`: ``nmt-convert`` prints it in one line)."""


class JoeyEncoder(nn.Module):
    """Joey's source embeddings + ``RecurrentEncoder`` + the decoder's ``_init_hidden``.

    ``forward(src (B,S) int64, lengths (B,)) -> (memory (B,S,2H), hidden)``, hidden the
    decoder's first state ``(layers,B,Hd)`` (an LSTM decoder: ``(h, c)``, both the same,
    as Joey initialises them). Packed, so a sentence's states do not depend on its batch
    mates' lengths (Joey packs too).
    """

    def __init__(
        self,
        lut: nn.Embedding,
        scale: bool,
        rnn: nn.RNNBase,
        init: str,
        bridge: nn.Linear | None,
        layers: int,
        hidden: int,
        lstm: bool,
    ) -> None:
        super().__init__()
        self.lut, self.scale, self.rnn, self.init = lut, scale, rnn, init
        self.bridge_layer = bridge
        self.layers, self.hidden, self.lstm = layers, hidden, lstm

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Hidden]:
        emb = self.lut(src)
        if self.scale:
            emb = emb * math.sqrt(emb.shape[-1])
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        h = final[0] if isinstance(final, tuple) else final  # (layers*2, B, H)
        last = h.view(self.rnn.num_layers, 2, h.shape[1], self.rnn.hidden_size)[-1]
        concat = torch.cat([last[0], last[1]], dim=1)  # (B, 2H): the top layer's two ends
        if self.init == "bridge":
            first = torch.tanh(self.bridge_layer(concat))
        elif self.init == "last":
            first = concat[:, : self.hidden] if concat.shape[1] == 2 * self.hidden else concat
        else:
            first = concat.new_zeros(concat.shape[0], self.hidden)
        state = first.unsqueeze(0).repeat(self.layers, 1, 1)
        return memory, ((state, state) if self.lstm else state)


class JoeyStep(nn.Module):
    """One step of Joey's ``RecurrentDecoder`` and its output layer.

    ``forward(token (B,), hidden (layers,B,H) | (h, c), memory (B,S,D), mask (B,S) bool,
    feed (B,H)) -> (logits (B,V), hidden, attention (B,S), feed)``; ``feed`` is Joey's
    ``prev_att_vector`` (zeros at the first step), fed to the RNN with input feeding.
    """

    def __init__(
        self,
        lut: nn.Embedding,
        scale: bool,
        rnn: nn.RNNBase,
        input_feeding: bool,
        attention: str,
        layers: nn.ModuleDict,
        lstm: bool,
    ) -> None:
        super().__init__()
        self.lut, self.scale, self.rnn, self.input_feeding = lut, scale, rnn, input_feeding
        self.attention, self.layers, self.lstm = attention, layers, lstm

    def forward(self, token: Tensor, hidden: Hidden, memory: Tensor, mask: Tensor, feed: Tensor):
        emb = self.lut(token).unsqueeze(1)  # (B,1,E)
        if self.scale:
            emb = emb * math.sqrt(emb.shape[-1])
        x = torch.cat([emb, feed.unsqueeze(1)], dim=2) if self.input_feeding else emb
        _, hidden = self.rnn(x, hidden)
        query = (hidden[0] if self.lstm else hidden)[-1].unsqueeze(1)  # (B,1,H)
        keys = self.layers["key_layer"](memory)  # (B,S,H)
        if self.attention == "bahdanau":
            q = self.layers["query_layer"](query)
            scores = self.layers["energy_layer"](torch.tanh(q + keys)).squeeze(2).unsqueeze(1)
        else:
            scores = query @ keys.transpose(1, 2)  # (B,1,S)
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        alphas = torch.softmax(scores, dim=-1)
        context = alphas @ memory
        att_vector = torch.tanh(self.layers["att_vector_layer"](torch.cat([query, context], 2)))
        logits = self.layers["output_layer"](att_vector)
        return logits.squeeze(1), hidden, alphas.squeeze(1), att_vector.squeeze(1)


def _mapping(node: Any, where: str) -> dict[str, Any]:
    """``node`` (a config section; absent: empty) as a dict, or a one-line refusal."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise JoeyError(f"config {where}: expected a mapping, got {type(node).__name__}")
    return node


@dataclass
class JoeyConfig:
    """What the converter reads of ``config.yaml``, each section checked to be a mapping."""

    path: Path
    encoder: dict[str, Any]
    decoder: dict[str, Any]
    src: dict[str, Any]
    trg: dict[str, Any]
    symbols: dict[str, Any]
    testing: dict[str, Any]
    tied_embeddings: bool

    @classmethod
    def read(cls, path: Path) -> JoeyConfig:
        import yaml

        try:
            cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            first = first_line(exc, None)
            raise JoeyError(f"{path}: not a readable Joey NMT config ({first})") from None
        if not isinstance(cfg, dict) or not isinstance(cfg.get("model"), dict):
            raise JoeyError(f"{path}: no model section: give the config.yaml Joey NMT trained with")
        model, data = cfg["model"], _mapping(cfg.get("data"), "data")
        return cls(
            path,
            _mapping(model.get("encoder"), "model.encoder"),
            _mapping(model.get("decoder"), "model.decoder"),
            _mapping(data.get("src"), "data.src"),
            _mapping(data.get("trg"), "data.trg"),
            _mapping(data.get("special_symbols"), "data.special_symbols"),
            _mapping(cfg.get("testing"), "testing"),
            bool(model.get("tied_embeddings", False)),
        )

    def side(self, name: str) -> dict[str, Any]:
        return self.src if name == "src" else self.trg


def _refuse(what: str, value: Any, supported: Any) -> JoeyError:
    return JoeyError(f"{what}: {value!r} is not supported (supported: {supported})")


def check_options(cfg: JoeyConfig) -> None:
    """Refuse, by name, every option the modules above do not compute (Joey's own
    defaults where the config is silent: its decoder ``type`` defaults to transformer)."""
    for side, part, default in (("encoder", cfg.encoder, "recurrent"),
                                ("decoder", cfg.decoder, "transformer")):  # fmt: skip
        if part.get("type", default) != "recurrent":
            raise _refuse(f"model.{side}.type", part.get("type", default), "recurrent (RNNs)")
        if part.get("rnn_type", "gru") not in ("gru", "lstm"):
            raise _refuse(f"model.{side}.rnn_type", part.get("rnn_type"), "gru, lstm")
        # Joey 2.3's build_activation returns nn.ReLU & co. as classes, which its RNN
        # decoder calls on a tensor and fails: only tanh (a function) ever ran
        if part.get("activation", "tanh") != "tanh":
            raise _refuse(f"model.{side}.activation", part.get("activation"), "tanh")
        _mapping(part.get("embeddings"), f"model.{side}.embeddings")
    if not cfg.encoder.get("bidirectional", True):
        raise _refuse("model.encoder.bidirectional", False, "true (Joey's RNN encoder needs it)")
    if cfg.decoder.get("attention", "bahdanau") not in ("bahdanau", "luong"):
        raise _refuse("model.decoder.attention", cfg.decoder.get("attention"), "bahdanau, luong")
    for key in ("lang_tags", "sep_token"):
        if cfg.symbols.get(key):
            raise _refuse(f"data.special_symbols.{key}", cfg.symbols[key], "none")
    # decoding options Joey applies that this server's own rules do otherwise
    for key in ("no_repeat_ngram_size", "repetition_penalty"):
        if _number(cfg.testing, key, -1, float) > 0:
            raise _refuse(f"testing.{key}", cfg.testing[key], "-1 (off)")
    for side in ("src", "trg"):
        text = cfg.side(side)
        level = text.get("level", "word")
        if level not in ("word", "bpe"):
            raise _refuse(f"data.{side}.level", level, "word, bpe (SentencePiece or subword-nmt)")
        kind = _bpe_kind(text)
        if level == "bpe" and kind not in ("subword-nmt", "sentencepiece"):
            raise _refuse(f"data.{side}.tokenizer_type", kind, "subword-nmt, sentencepiece")
        if text.get("normalize"):
            raise _refuse(f"data.{side}.normalize", True, "false")
        if level == "bpe" and text.get("lowercase"):
            raise _refuse(f"data.{side}.lowercase with level bpe", True, "false")
        tok_cfg = _mapping(text.get("tokenizer_cfg"), f"data.{side}.tokenizer_cfg")
        pre = tok_cfg.get("pretokenizer", "none")
        if str(pre).lower() != "none":
            raise _refuse(f"data.{side}.tokenizer_cfg.pretokenizer", pre, "none")
        if tok_cfg.get("separator", "@@") != "@@":
            raise _refuse(f"data.{side}.tokenizer_cfg.separator", tok_cfg["separator"], "@@")


def _bpe_kind(text: dict[str, Any]) -> str:
    """The subword library of a ``bpe`` level side (Joey's default: SentencePiece)."""
    return text.get("tokenizer_type", text.get("bpe_type", "sentencepiece"))


def _number(section: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    """``section[key]`` as ``kind`` (its default when absent), or a one-line refusal."""
    value = section.get(key, default)
    try:
        return kind(default if value is None else value)
    except (TypeError, ValueError):
        raise JoeyError(f"config {key}: {value!r} is not a number") from None


def special_ids(cfg: JoeyConfig) -> dict[str, int]:
    return {name: _number(cfg.symbols, f"{name}_id", id_, int) for name, id_ in SPECIAL_IDS.items()}


def _training_config_hint(config: Path) -> None:
    """A config whose directory has no best.ckpt may be the one training started from
    (configs/small.yaml): Joey writes its copy, and the checkpoints, to
    ``training.model_dir``; say so when that directory holds them."""
    import yaml

    if any((config.parent / f"{side}_vocab.txt").exists() for side in ("src", "trg")):
        return  # a model directory (vocabularies beside it) whose checkpoint is missing
    try:
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        # Joey 2.x reads it under training, or at the top level
        model_dir = Path(str((raw.get("training") or {}).get("model_dir") or raw["model_dir"]))
    except Exception:  # noqa: BLE001 - no hint, then: the caller's error stands
        return
    if not model_dir.is_absolute():
        model_dir = (
            (Path.cwd() / model_dir)
            if (Path.cwd() / model_dir).is_dir()
            else (config.parent / model_dir)
        )
    if (model_dir / "config.yaml").is_file() and model_dir.resolve() != config.parent.resolve():
        raise JoeyError(
            f"no best.ckpt beside {config}: it looks like the config training started from; "
            f"convert the model directory's copy, {model_dir / 'config.yaml'} (training."
            "model_dir), whose checkpoints are beside it"
        )


def _weights(path: Path) -> dict[str, Tensor]:
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise JoeyError(f"checkpoint not found: {path}; give --checkpoint") from None
    except Exception as exc:  # a file torch cannot read, or one holding code
        if path.is_file() and not zipfile.is_zipfile(path):
            why = "not a torch file, or one cut short"
        elif "Weights only load failed" in str(exc):  # torch's advice: unpickle it
            why = "it holds Python objects besides tensors, which are never unpickled here"
        else:
            why = first_line(exc)
        raise JoeyError(f"{path}: not a readable Joey NMT checkpoint ({why})") from None
    state = ckpt.get("model_state") if isinstance(ckpt, dict) else None
    if not isinstance(state, dict):
        raise JoeyError(f"{path} holds no model_state: give the checkpoint Joey NMT wrote")
    return state


def _rnn(kind: str, w: dict[str, Tensor], prefix: str, bidirectional: bool) -> nn.RNNBase:
    layers = sum(1 for k in w if k.startswith(f"{prefix}.weight_ih_l") and "reverse" not in k)
    w_ih = w[f"{prefix}.weight_ih_l0"]
    hidden = w_ih.shape[0] // (4 if kind == "lstm" else 3)
    rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(
        w_ih.shape[1], hidden, layers, batch_first=True, bidirectional=bidirectional
    )
    own = {k[len(prefix) + 1 :]: v for k, v in w.items() if k.startswith(prefix + ".")}
    rnn.load_state_dict(own)
    return rnn.eval()


def build_modules(cfg: JoeyConfig, w: dict[str, Tensor]) -> tuple[JoeyEncoder, JoeyStep]:
    """The encoder and step modules of a checked config, with the checkpoint's weights."""
    enc, dec = cfg.encoder, cfg.decoder
    pad = special_ids(cfg)["pad"]
    luts = [
        nn.Embedding.from_pretrained(w[f"{s}_embed.lut.weight"], freeze=True, padding_idx=pad)
        for s in ("src", "trg")
    ]
    dec_lstm = dec.get("rnn_type", "gru") == "lstm"
    dec_rnn = _rnn(dec.get("rnn_type", "gru"), w, "decoder.rnn", bidirectional=False)
    # Joey: "bridge" and "last" are what they say, any other value zeros
    init = dec.get("init_hidden", "bridge")
    src_scale = bool((enc.get("embeddings") or {}).get("scale", False))
    encoder = JoeyEncoder(
        luts[0],
        src_scale,
        _rnn(enc.get("rnn_type", "gru"), w, "encoder.rnn", bidirectional=True),
        init,
        linear_from(w, "decoder.bridge_layer") if init == "bridge" else None,
        dec_rnn.num_layers,
        dec_rnn.hidden_size,
        dec_lstm,
    )
    attention = dec.get("attention", "bahdanau")
    names = ["attention.key_layer", "att_vector_layer", "output_layer"]
    if attention == "bahdanau":
        names += ["attention.query_layer", "attention.energy_layer"]
    layers = nn.ModuleDict({n.split(".")[-1]: linear_from(w, f"decoder.{n}") for n in names})
    # tied embeddings: Joey's target side is the source's Embeddings, its scale included
    trg_scale = bool((dec.get("embeddings") or {}).get("scale", False))
    step = JoeyStep(
        luts[1],
        src_scale if cfg.tied_embeddings else trg_scale,
        dec_rnn,
        bool(dec.get("input_feeding", True)),
        attention,
        layers,
        dec_lstm,
    )
    return encoder.eval(), step.eval()


def _tokenizer(cfg: JoeyConfig, side: str, model_dir: Path, ids: dict[str, int]):
    text = cfg.side(side)
    vocab_file = model_dir / f"{side}_vocab.txt"
    if not vocab_file.is_file():
        vocab_file = Path(text.get("voc_file", vocab_file))
    try:
        tokens = read_vocabulary(vocab_file)
    except TokenizerError as exc:
        raise JoeyError(f"{side} vocabulary: {exc}") from None
    outside = {k: v for k, v in ids.items() if not 0 <= v < len(tokens)}
    if outside:
        raise JoeyError(f"special ids {outside} lie outside the {side} vocabulary of {len(tokens)}")
    end = [tokens[ids["eos"]]] if side == "src" else []  # Joey appends EOS to sources
    if text.get("level", "word") == "word":
        return WordTokenizer(
            tokens,
            unk_id=ids["unk"],
            lowercase=bool(text.get("lowercase")),
            split_punctuation=False,
            end_tokens=end,
        )
    tok_cfg = text.get("tokenizer_cfg") or {}
    sentencepiece = _bpe_kind(text) == "sentencepiece"
    key = "model_file" if sentencepiece else "codes"
    if not tok_cfg.get(key):
        raise JoeyError(
            f"data.{side}.tokenizer_cfg.{key} is not set: name the {_bpe_kind(text)} file"
        )
    model = Path(tok_cfg[key])
    if not model.is_file():
        model = model_dir / model.name  # Joey copies its subword model into the model dir
    if sentencepiece:
        try:
            return PieceTokenizer(
                model.read_bytes(), tokens, unk_id=ids["unk"], end_tokens=end, strip=True
            )
        except (OSError, TokenizerError) as exc:
            raise JoeyError(f"data.{side}.tokenizer_cfg.model_file: {exc}") from None
    specials = {tokens[i] for i in ids.values()}
    pieces = [t for t in tokens if t not in specials]  # subword-nmt's vocab: Joey's set_vocab
    try:
        return BpeTokenizer(
            tokens, unk_id=ids["unk"], codes_file=model, vocabulary=pieces, end_tokens=end
        )
    except TokenizerError as exc:
        raise JoeyError(f"data.{side}: {exc}") from None


def decoding(cfg: JoeyConfig) -> dict[str, Any]:
    """Joey's test-time rules as the bundle's decoding defaults (see the module
    docstring): its beam search; ``max_output_length`` fixed, or 1.5 x the source, our
    limit counting the EOS Joey's does not; ``beam_alpha`` (or the obsolete ``alpha``)
    as the length penalty, none when <= 0 (Joey's default, -1). ``min_output_length``
    is not read: Joey 2.3 parses it but never passes it to its search, which blocks EOS
    at the first step only."""
    test = cfg.testing
    fixed = _number(test, "max_output_length", -1, int)
    if fixed > 0:
        rule = {"max_length": fixed + 1, "max_length_ratio": 0.0, "max_length_offset": fixed + 1}
    else:
        rule = {"max_length_ratio": 1.5, "max_length_offset": 1}
    alpha = _number(test, "alpha", _number(test, "beam_alpha", -1, float), float)
    out = rule | {"min_length": 1, "length_penalty": alpha if alpha > 0 else 0.0}
    if not test.get("generate_unk", True):
        out["ban_unk"] = True
    return out | {"search": "joeynmt"}


def joey_user_model(config: Path, checkpoint: Path | None = None) -> UserModel:
    """Load and validate a Joey NMT RNN model; its modules with their declaration."""
    cfg = JoeyConfig.read(config)
    check_options(cfg)
    model_dir = config.parent
    path = checkpoint or model_dir / "best.ckpt"
    if checkpoint is None and not path.exists():
        _training_config_hint(config)
    w = _weights(path)
    try:
        encoder, step = build_modules(cfg, w)
    except KeyError as exc:
        raise JoeyError(f"{path}: weight {exc} missing: is it this config's checkpoint?") from None
    except (RuntimeError, ValueError, TypeError, AttributeError) as exc:  # shapes, values
        raise JoeyError(f"{path} does not fit {config.name}: {first_line(exc)}") from None
    ids = special_ids(cfg)
    source, target = (_tokenizer(cfg, side, model_dir, ids) for side in ("src", "trg"))
    for side, tok, lut in (("src", source, encoder.lut), ("trg", target, step.lut)):
        if tok.vocab_size != lut.num_embeddings:
            raise JoeyError(
                f"the {side} vocabulary has {tok.vocab_size} entries but the checkpoint's "
                f"{side} embeddings have {lut.num_embeddings} rows: is it this model's "
                f"{side}_vocab.txt?"
            )
    lstm = cfg.decoder.get("rnn_type", "gru") == "lstm"
    signature = Signature(
        encoder_args=("src", "lengths"),
        rnn="lstm" if lstm else "gru",
        decoder_args=("token", "hidden", "memory", "mask", "feed"),
        token_shape="B",
        decoder_returns=("logits", "hidden", "attention", "feed"),
        extra_state={"feed": step.rnn.hidden_size},
    )
    origin = {"converter": "joeynmt", "config": str(config), "checkpoint": str(path)}
    return UserModel(
        encoder, step, source, target, ids, signature, origin=origin, decoding=decoding(cfg)
    )
