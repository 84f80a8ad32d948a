"""Marian RNN models: ``nmt-convert marian model.npz --vocabs SRC TGT --out DIR``.

Load -> validate -> declare, as the other converters: the ``model.npz`` Marian's trainer
wrote for ``--type s2s`` (numpy arrays and the ``special:model.yml`` entry holding the
model's options; read with ``allow_pickle=False``) and its vocabularies (Marian's ``.yml``
/ ``.json`` token -> id maps, or its SentencePiece ``.spm``) become two modules that
compute what Marian's ``EncoderS2S`` and one step of ``DecoderS2S`` compute at inference
time (``src/models/s2s.h``, ``src/rnn/*``); every option they cannot express is refused
by name. Nematus-format models (``--type amun``/``nematus``, and those Nematus wrote,
which hold no ``special:model.yml``) are renamed and their options read by
:mod:`export.nematus`.

What Marian does that the bundle reproduces (``marian-decoder``, one sentence a batch):

* the source is split on spaces (or by the ``.spm`` model), ``</s>`` appended; the
  network as :mod:`export.marian_modules` rebuilds it;
* its beam search (``src/translator/beam_search.cpp``): the beam shrinks by each
  hypothesis that ends (``search="marian"``); a hypothesis's score is ``log_prob /
  length ** normalize`` (length counting EOS); after ``max-length-factor x source
  tokens`` (EOS counted) target tokens every live hypothesis ends without EOS; ``<unk>``
  is never produced (``--allow-unk`` off), nor are the byte pieces of control characters
  (``--allow-special`` off).
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch import Tensor

from export import nematus
from export.marian_modules import build_modules
from export.modules import first_line
from export.signature import Signature
from export.user import UserModel
from export.writer import ExportError
from models.bpe import BpeTokenizer
from models.bpe import read_vocabulary as read_bpe_vocabulary
from models.pieces import PieceTokenizer
from models.tokenizer import TokenizerError, sentencepiece_processor
from models.words import WordTokenizer

# the model types read and the cells each takes (amun and nematus: Nematus-format models,
# export.nematus)
TYPES = {"s2s": ("gru", "lstm"), "amun": ("gru",), "nematus": ("gru-nematus",)}
ENC_TYPES = ("bidirectional", "bi-unidirectional")
# marian-decoder's defaults (src/common/config_parser.cpp)
DECODER = {"normalize": 0.0, "word-penalty": 0.0, "max-length-factor": 3.0}
# Marian checks no source longer than --max-length (1000) at translation time; the
# bundle's limit needs a number: this many target tokens at most, whatever the source
MAX_TARGET = 3001


class MarianError(ExportError, ValueError):
    """A Marian model that cannot be read or that uses an option the bundle lacks (an
    :class:`~export.writer.ExportError`: ``nmt-convert`` prints it in one line)."""


@dataclass
class MarianModel:
    """What the converter reads of a ``model.npz`` and the ``decoder.yml`` beside it."""

    path: Path
    options: dict[str, Any]  # special:model.yml
    weights: dict[str, Tensor]
    decoder: dict[str, Any]  # model.npz.decoder.yml: vocabularies, decoding options

    @classmethod
    def read(cls, path: Path) -> MarianModel:
        if path.suffix == ".bin":
            raise MarianError(f"{path}: Marian's binary format is not read: give the .npz")
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except FileNotFoundError:
            raise MarianError(f"model not found: {path}") from None
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise MarianError(f"{path}: not a readable Marian .npz model ({exc})") from None
        spec = arrays.pop("special:model.yml", None)
        if spec is not None:
            try:
                options = yaml.safe_load(spec.tobytes().rstrip(b"\0").decode("utf-8"))
            except (UnicodeDecodeError, yaml.YAMLError) as exc:
                raise MarianError(f"{path}: its special:model.yml is not YAML ({exc})") from None
            options = options if isinstance(options, dict) else {}
        elif nematus.MARKER in arrays:  # written by Nematus: Marian takes options as flags
            options = nematus.infer_options(path, arrays)
        else:
            raise MarianError(
                f"{path} holds no special:model.yml (nor Nematus's {nematus.MARKER}): "
                "not a Marian or Nematus model"
            )
        if options.get("type") in ("amun", "nematus") and nematus.MARKER in arrays:
            arrays = nematus.marian_names(arrays, options)  # as Marian renames on load
        weights = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in arrays.items()}
        return cls(path, options, weights, _decoder_yml(path))


def _refuse(what: str, value: Any, supported: str) -> MarianError:
    return MarianError(f"{what}: {value!r} is not supported (supported: {supported})")


def check_options(model: MarianModel) -> None:
    """Refuse, by name, what :mod:`export.marian_modules` does not compute."""
    o = model.options
    kind = o.get("type")
    if kind not in TYPES:
        hint = " (Transformers: CTranslate2 converts Marian's)" if kind == "transformer" else ""
        raise _refuse("--type", kind, ", ".join(TYPES) + ": Marian's RNN encoder-decoders" + hint)
    if o.get("original-type") not in (None, kind):
        raise _refuse("original-type", o.get("original-type"), kind)
    cells = TYPES[kind]
    for flag in ("enc-cell", "dec-cell"):
        if o.get(flag, cells[0]) not in cells:
            raise _refuse(f"--{flag}", o.get(flag), f"{', '.join(cells)} (--type {kind})")
    if kind == "nematus":  # what nematus.h's name map or GRUNematus cannot take
        if o.get("tied-embeddings-src") or o.get("tied-embeddings-all"):
            raise _refuse("--tied-embeddings-src/-all", True, "--tied-embeddings (--type nematus)")
        if int(o.get("dec-cell-high-depth", 1)) > 1:
            high = o.get("dec-cell-high-depth")
            raise _refuse("--dec-cell-high-depth", high, "1 (--type nematus)")
    if o.get("enc-type", "bidirectional") not in ENC_TYPES:
        raise _refuse("--enc-type", o.get("enc-type"), ", ".join(ENC_TYPES))
    if int(o.get("dec-cell-base-depth", 2)) < 2:
        raise _refuse("--dec-cell-base-depth", o.get("dec-cell-base-depth"), ">= 2")
    if o.get("right-left"):
        raise _refuse("--right-left", True, "left-to-right models")
    vocabs = [str(v) for v in o.get("vocabs") or []]
    if any(v.endswith(".fsv") for v in vocabs):
        raise _refuse("factored vocabulary", vocabs, ".yml, .json or .spm vocabularies")
    if len(o.get("dim-vocabs") or []) != 2:
        raise _refuse("inputs", len(o.get("dim-vocabs") or []), "one source and one target")


def read_vocabulary(path: Path, size: int) -> tuple[list[str], bytes | None]:
    """A Marian vocabulary as its tokens by id, and the SentencePiece model's bytes for an
    ``.spm`` one (Marian's ids are SentencePiece's: ``</s>`` 0, ``<unk>`` 1). A ``.yml``,
    ``.yaml`` or ``.json`` one maps each token to its id, read as Marian reads all three:
    YAML, every scalar a string (``yes`` and ``010`` are tokens, not a boolean and eight);
    any other file has one token a line. As Marian, only ids below ``size`` (the model's
    ``dim-vocabs``) are kept."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MarianError(f"vocabulary {path}: {exc.strerror or exc}") from None
    if path.suffix == ".spm":
        try:
            sp = sentencepiece_processor(raw)
        except (TokenizerError, RuntimeError, OSError) as exc:
            raise MarianError(f"vocabulary {path}: not a SentencePiece model ({exc})") from None
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())], raw
    try:
        text = raw.decode("utf-8")
        if path.suffix in (".yml", ".yaml", ".json"):
            entries = yaml.load(text, yaml.BaseLoader)
        else:
            entries = {line: str(i) for i, line in enumerate(text.splitlines())}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MarianError(
            f"vocabulary {path}: not a Marian vocabulary ({first_line(exc)})"
        ) from None
    if not isinstance(entries, dict) or not entries:
        raise MarianError(f"vocabulary {path}: not a 'token: id' map (.yml, .json or .spm)")
    by_id: dict[int, str] = {}
    for token, value in entries.items():
        number = int(value) if str(value).isdigit() else -1
        if number < 0 or number in by_id:
            raise MarianError(
                f"vocabulary {path}: {token!r} has id {value!r}; ids must be 0, 1, ..., each once"
            )
        if number < size:
            by_id[number] = str(token)
    if path.suffix == ".json":  # Marian: a JSON vocabulary's unnamed 0 and 1 are EOS, UNK
        for number, name in enumerate(NEMATUS_UNNAMED):
            by_id.setdefault(number, name)
    if sorted(by_id) != list(range(len(by_id))):
        missing = min(set(range(len(by_id))) - set(by_id))
        raise MarianError(f"vocabulary {path}: no token has id {missing}")
    return [by_id[i] for i in range(len(by_id))], None


# the names of a JSON vocabulary's ids 0 and 1 when it has none (Nematus's dictionary
# builder overwrote its "eos" with a word "eos": Marian reads ids 0, 1 as EOS, UNK)
NEMATUS_UNNAMED = ("<nematus:eos>", "<nematus:unk>")
# what Marian never produces unless --allow-special: the byte pieces of control
# characters (DefaultVocab / SentencePieceVocab::populateControlChars)
CONTROL = tuple(f"<0x{i:02X}>" for i in range(32))


def _decoder_yml(path: Path) -> dict[str, Any]:
    """The ``model.npz.decoder.yml`` Marian's trainer writes beside the model ``path`` ({}
    if none): its vocabularies and decoding options."""
    found = path.with_name(path.name + ".decoder.yml")
    if not found.is_file():
        return {}
    try:
        loaded = yaml.safe_load(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MarianError(f"{found}: not readable YAML ({exc})") from None
    return loaded if isinstance(loaded, dict) else {}


def _vocab_paths(model: MarianModel, given: list[Path] | None) -> list[Path]:
    """The two vocabularies: given, else those the model was trained with, found as
    recorded or beside the model."""
    if given:
        if len(given) != 2:
            raise MarianError(f"--vocabs takes a source and a target vocabulary, not {len(given)}")
        return given
    paths = []
    recorded_vocabs = model.options.get("vocabs") or model.decoder.get("vocabs") or []
    for recorded in recorded_vocabs:
        path = Path(str(recorded))
        beside = model.path.parent / path.name
        paths.append(path if path.is_file() else beside)
    if not recorded_vocabs:
        raise MarianError(
            f"{model.path.name} records no vocabularies (no {model.path.name}.decoder.yml "
            "beside it, nor vocabs in its options): give --vocabs SRC TGT, the files "
            "marian was trained with"
        )
    if len(paths) != 2 or not all(p.is_file() for p in paths):
        raise MarianError(
            f"the vocabularies {recorded_vocabs} the model was trained with are "
            f"not found (nor beside {model.path.name}): give --vocabs SRC TGT"
        )
    return paths


def _tokenizer(tokens: list[str], proto: bytes | None, side: str, extra: list[str], path: Path,
               bpe: tuple[Path, list[str] | None] | None = None):  # fmt: skip
    # a .json vocabulary may name them as Nematus does (Marian's DefaultVocab back-compat)
    nematus_names = (
        path.suffix == ".json"
        and tokens[0] in ("eos", NEMATUS_UNNAMED[0])
        and tokens[1] in ("UNK", NEMATUS_UNNAMED[1])
    )
    if tokens[:2] != ["</s>", "<unk>"] and not nematus_names:
        raise MarianError(
            f"the {side} vocabulary starts {tokens[:2]}, not Marian's </s> (0), <unk> (1)"
            + (" or Nematus's eos, UNK" if path.suffix == ".json" else "")
        )
    if nematus_names and side == "target":  # the bundle names its markers as markers;
        tokens = ["</s>", "<unk>", *tokens[2:]]  # the source keeps Marian's reading of text
    end = tokens[:1] if side == "source" else []
    if bpe is not None:  # text segmented as subword-nmt's apply-bpe does, "@@ " undone
        if proto is not None:
            raise MarianError("--bpe-codes: the vocabularies are SentencePiece's (.spm)")
        try:
            return BpeTokenizer(tokens + extra, unk_id=1, codes_file=bpe[0],
                                vocabulary=bpe[1] if side == "source" else None,
                                end_tokens=end)  # fmt: skip
        except TokenizerError as exc:
            raise MarianError(f"--bpe-codes: {exc}") from None
    if proto is None:
        return WordTokenizer(tokens + extra, unk_id=1, lowercase=False,
                             split_punctuation=False, end_tokens=end)  # fmt: skip
    return PieceTokenizer(proto, tokens + extra, unk_id=1, end_tokens=end)


def decoding(model: MarianModel, given: dict[str, Any]) -> dict[str, Any]:
    """Marian's decoding rules as the bundle's defaults: ``given`` (flags), else the
    model's ``decoder.yml``, else ``marian-decoder``'s defaults (module docstring)."""
    loaded = model.decoder
    from_file = {k: loaded[k] for k in (*DECODER, "allow-unk") if k in loaded}
    o = DECODER | from_file | {k: v for k, v in given.items() if v is not None}
    factor, normalize = float(o["max-length-factor"]), float(o["normalize"])
    if not math.isfinite(factor) or factor < 1 or factor != int(factor):
        raise MarianError(
            f"--max-length-factor {factor:g}: the bundle takes a whole number >= 1 (Marian "
            "rounds factor x source tokens up; the bundle's limit is a whole multiple)"
        )
    if not math.isfinite(normalize) or normalize < 0:
        raise MarianError(f"--normalize {normalize:g}: give a number >= 0")
    if float(o["word-penalty"]) != 0:
        raise _refuse("--word-penalty", o["word-penalty"], "0")
    return {
        "max_length": MAX_TARGET,
        "max_length_ratio": factor,
        "max_length_offset": 1,  # the limit counts an EOS Marian never adds at its limit
        "min_length": 0,
        "length_penalty": normalize,
        "ban_unk": not o.get("allow-unk", False),
        "search": "marian",
    }


def _bpe(codes: Path | None, vocabulary: Path | None, threshold: int | None):
    """``(codes, the pieces apply-bpe may output or None)``, or None without codes."""
    if codes is None:
        if vocabulary is not None or threshold is not None:
            raise MarianError("--bpe-vocabulary / --bpe-vocabulary-threshold need --bpe-codes")
        return None
    if threshold is not None and vocabulary is None:
        raise MarianError("--bpe-vocabulary-threshold needs --bpe-vocabulary")
    if vocabulary is None:
        return codes, None
    try:
        text = vocabulary.read_text(encoding="utf-8")
        return codes, read_bpe_vocabulary(text, threshold)
    except (OSError, UnicodeDecodeError, TokenizerError) as exc:
        raise MarianError(f"--bpe-vocabulary {vocabulary}: {exc}") from None


def marian_user_model(
    path: Path,
    *,
    vocabs: list[Path] | None = None,
    options: dict[str, Any] | None = None,
    bpe_codes: Path | None = None,
    bpe_vocabulary: Path | None = None,
    bpe_threshold: int | None = None,
) -> UserModel:
    """Load and validate a Marian s2s ``model.npz``; its modules with their declaration.

    ``vocabs``: the source and target vocabularies (``-v`` of marian-decoder; default:
    those the model was trained with); ``options``: ``normalize``, ``max-length-factor``,
    ``word-penalty``, ``allow-unk``, ``allow-special`` (let the byte pieces of control
    characters, ``<0x00>`` ... ``<0x1F>``, be produced) when not the model's
    ``decoder.yml``'s or Marian's; ``bpe_codes``: the subword-nmt codes the model's text
    was segmented with (``bpe_vocabulary``, ``bpe_threshold``: apply-bpe's
    ``--vocabulary``, ``--vocabulary-threshold``): the bundle then takes the text before
    BPE and returns it with ``"@@ "`` undone (else: tokens in, tokens out, as Marian)."""
    bpe = _bpe(bpe_codes, bpe_vocabulary, bpe_threshold)
    model = MarianModel.read(path)
    check_options(model)
    sizes = [int(v) for v in model.options["dim-vocabs"]]
    paths = _vocab_paths(model, vocabs)
    vocab = [read_vocabulary(p, n) for p, n in zip(paths, sizes, strict=True)]
    try:
        encoder, step = build_modules(model.options, model.weights)
        with torch.no_grad():  # one sentence of two tokens, one step: shapes that do not fit
            memory, hidden = encoder(torch.zeros(1, 2, dtype=torch.long), torch.tensor([2]))
            step(torch.zeros(1, dtype=torch.long), hidden, memory, torch.ones(1, 2, dtype=bool))
    except KeyError as exc:
        raise MarianError(f"{path}: weight {exc} missing: not a Marian s2s model") from None
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        raise MarianError(f"{path}: weights do not fit an s2s model: {first_line(exc)}") from None
    rows = (encoder.embed.shape[0], step.embed.shape[0] - 2)
    for side, (tokens, _), size, row in zip(("source", "target"), vocab, sizes, rows, strict=True):
        if len(tokens) != size or row != size:
            raise MarianError(
                f"the {side} vocabulary has {len(tokens)} tokens, the model {size} ({row} "
                f"embedding rows): is it this model's vocabulary?"
            )
    # the bundle's pad and bos: ids past the target vocabulary, names it does not hold;
    # the source's ids must reach the pad id too (markers the encoder reads as <unk>)
    names = ("<pad>", "<s>", "<marian:pad>", "<marian:bos>")
    extra = [n for n in names if n not in vocab[1][0]][:2]
    unused = [f"<marian:unused:{i}>" for i in range(sizes[0], sizes[1] + 1)]
    source = _tokenizer(*vocab[0], "source", unused, paths[0], bpe)
    target = _tokenizer(*vocab[1], "target", extra, paths[1], bpe)
    ids = {"eos": 0, "unk": 1, "pad": sizes[1], "bos": sizes[1] + 1}
    lstm = model.options.get("dec-cell", "gru") == "lstm"
    signature = Signature(
        encoder_args=("src", "lengths"),
        rnn="lstm" if lstm else "gru",
        decoder_args=("token", "hidden", "memory", "mask"),
        token_shape="B",
        decoder_returns=("logits", "hidden", "attention"),
    )
    allow_special = (options or {}).get("allow-special")
    if allow_special is None:
        allow_special = bool(model.decoder.get("allow-special", False))
    blocked = [] if allow_special else [i for i, t in enumerate(vocab[1][0]) if t in CONTROL]
    if blocked:
        step.block(blocked)
    origin = {"converter": "marian", "model": str(path), "vocabs": [str(p) for p in paths],
              "never_produced": [vocab[1][0][i] for i in blocked]}  # fmt: skip
    if bpe_codes is not None:
        origin["bpe_codes"] = str(bpe_codes)
    return UserModel(
        encoder, step, source, target, ids, signature, origin=origin,
        decoding=decoding(model, options or {}),
    )  # fmt: skip
