"""What ``onmt-main``'s files say about an OpenNMT-tf 2.x model, read as OpenNMT-tf reads them
(for :mod:`export.opennmt_tf`): ``model_description.py``, the model's definition, *read*
from its syntax tree, never run (:func:`read_description`; the catalog's RNN models by
name); the ``--config`` files merged as ``onmt-main`` merges them (:func:`read_config`);
the vocabularies as ``onmt-build-vocab`` writes them (``<blank>`` 0, ``<s>`` 1, ``</s>`` 2)
plus the out-of-vocabulary bucket after the file's last token (:func:`onmt_vocabulary`);
the tokenizer, OpenNMT-tf's default ``SpaceTokenizer`` or an ``OpenNMTTokenizer``
configuration (:func:`onmt_tokenizer`); and the decoding defaults of ``params``
(:func:`decoding_defaults`). Every option the bundle cannot reproduce is refused by name.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from export.keras import loop_decoding
from export.modules import first_line
from export.writer import ExportError
from models.onmt import OnmtTokenizer
from models.tokenizer import TokenizerError
from models.words import WordTokenizer, read_vocabulary

PAD, BOS, EOS = "<blank>", "<s>", "</s>"  # opennmt.constants: ids 0, 1, 2
UNK = "<unk>"  # the out-of-vocabulary bucket, after the vocabulary file's tokens
MAX_DECODING_LENGTH = 250  # params.maximum_decoding_length's default
# the catalog's RNN models: their attention layer's activation (AttentionalRNNDecoder's
# attention_layer_activation: tanh unless the model sets None)
CATALOG = {"NMTSmallV1": False, "NMTMediumV1": False, "NMTBigV1": False, "LuongAttention": True}
DESCRIPTION = "model_description.py"


class OpenNMTTFError(ExportError, ValueError):
    """An OpenNMT-tf model that cannot be read or uses what the bundle lacks (one line)."""


@dataclass(frozen=True)
class Description:
    """What the model definition says and the weights cannot: the attention layer's
    activation, the bridge (``copy``: the encoder's final states; ``zero``), the reducer
    of a bidirectional encoder (``concat``, ``sum``)."""

    name: str
    tanh: bool = True
    bridge: str = "copy"
    reducer: str = "concat"
    attention: str = "luong"  # or "bahdanau"


def _literal(node: ast.expr) -> Any:
    """The value an argument's syntax gives: a constant, or a dotted name as a string."""
    if isinstance(node, ast.Constant):
        return node.value
    return ast.unparse(node)  # tf.keras.layers.LSTMCell, opennmt.layers.ConcatReducer()


def _calls(tree: ast.AST) -> dict[str, list[ast.Call]]:
    """The calls in ``tree`` by the last name of what they call (``opennmt.encoders.
    RNNEncoder(...)`` under ``RNNEncoder``)."""
    calls: dict[str, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            calls.setdefault(ast.unparse(node.func).split(".")[-1], []).append(node)
    return calls


# arguments of the user's definition that the bundle reproduces only with these values
_REQUIRED = {
    "residual_connections": (False,),
    "first_layer_attention": (False,),
    "cell_class": ("tf.keras.layers.LSTMCell", "keras.layers.LSTMCell", "LSTMCell",
                   "tf.keras.layers.GRUCell", "keras.layers.GRUCell", "GRUCell"),
    "attention_mechanism_class": ("tfa.seq2seq.LuongAttention", "LuongAttention",
                                  "tfa.seq2seq.BahdanauAttention", "BahdanauAttention"),
}  # fmt: skip
_BRIDGES = {"CopyBridge": "copy", "ZeroBridge": "zero"}
_REDUCERS = {"ConcatReducer": "concat", "SumReducer": "sum"}
_TANH = ("tf.math.tanh", "tf.nn.tanh", "tf.tanh", "tanh", "tf.keras.activations.tanh")


def read_description(path: Path) -> Description:
    """The model ``path`` (``model_description.py``) defines, read without running it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OpenNMTTFError(
            f"{path} not found: OpenNMT-tf writes it into the model directory when it trains; "
            "give --model-type NAME (the catalog model you trained) instead"
        ) from None
    catalog = re.search(r"get_model_from_catalog\(\s*[\"'](\w+)[\"']\s*\)", text)
    if catalog:
        return catalog_model(catalog.group(1))
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise OpenNMTTFError(f"{path}: not Python ({first_line(exc)})") from None
    calls = _calls(tree)
    decoders = calls.get("AttentionalRNNDecoder", [])
    encoders = calls.get("RNNEncoder", [])
    catalog = set(calls) & set(CATALOG)
    if not decoders and not encoders and len(catalog) == 1:  # built by its class: NMTSmallV1()
        return catalog_model(catalog.pop())
    if len(decoders) != 1 or len(encoders) != 1:
        found = sorted(n for n in calls if re.search(r"(En|De)coder$", n))
        raise OpenNMTTFError(
            f"{path}: not one RNNEncoder and one AttentionalRNNDecoder (found {found or 'none'}); "
            "the converter takes OpenNMT-tf's RNN models with Luong attention (a catalog "
            "model: give --model-type NAME)"
        )
    for call in calls.get("SequenceToSequence", []):
        for kw in call.keywords:
            shared = _literal(kw.value) if kw.arg == "share_embeddings" else None
            if shared is not None and str(shared).split(".")[-1] not in ("NONE", "0"):
                raise OpenNMTTFError(
                    f"{path}: share_embeddings={ast.unparse(kw.value)} is not supported (the "
                    "converter reads the source and target embeddings and the output layer "
                    "as separate weights); convert a model trained without it"
                )
    # RNNDecoder's defaults: tanh, ZeroBridge; RNN's: ConcatReducer
    found = {"tanh": True, "bridge": "zero", "reducer": "concat", "attention": "luong"}
    for call in (*encoders, *decoders):
        what = ast.unparse(call.func).split(".")[-1]
        if len(call.args) > 2:  # num_layers, num_units; the rest the weights cannot tell
            raise OpenNMTTFError(
                f"{path}: {what} takes {len(call.args)} positional arguments: give those after "
                "num_layers and num_units by name, so that the converter can read them"
            )
        for kw in call.keywords:
            if kw.arg is None:
                raise OpenNMTTFError(
                    f"{path}: {what}(**{ast.unparse(kw.value)}): give its arguments by name, "
                    "so that the converter can read them"
                )
            value = _literal(kw.value)
            last = str(value).split("(")[0].split(".")[-1]
            if kw.arg == "attention_layer_activation":
                if value is not None and value not in _TANH:
                    raise OpenNMTTFError(
                        f"{path}: attention_layer_activation={value}: only tanh or None"
                    )
                found["tanh"] = value is not None
            elif kw.arg in ("bridge_class", "reducer"):
                table = _BRIDGES if kw.arg == "bridge_class" else _REDUCERS
                if value is None and kw.arg == "bridge_class":
                    last = "ZeroBridge"  # RNNDecoder's default
                if last not in table:
                    raise OpenNMTTFError(
                        f"{path}: {kw.arg}={value} is not supported ({', '.join(table)} are)"
                    )
                found["bridge" if kw.arg == "bridge_class" else "reducer"] = table[last]
            if kw.arg == "attention_mechanism_class" and "Bahdanau" in str(value):
                found["attention"] = "bahdanau"
            elif kw.arg in _REQUIRED and value not in _REQUIRED[kw.arg]:
                if kw.arg == "cell_class" and value is None:
                    continue  # make_rnn_cell's default: LSTMCell
                if kw.arg == "attention_mechanism_class" and value is None:
                    continue  # AttentionalRNNDecoder's default: LuongAttention
                raise OpenNMTTFError(
                    f"{path}: {kw.arg}={value} is not supported (the converter reproduces "
                    f"{_REQUIRED[kw.arg][0]})"
                )
    return Description(path.name, **found)


def catalog_model(name: str) -> Description:
    if name not in CATALOG:
        raise OpenNMTTFError(
            f"catalog model {name!r} is not one of OpenNMT-tf's RNN models "
            f"({', '.join(CATALOG)}); CTranslate2 converts its Transformers"
        )
    return Description(name, tanh=CATALOG[name])  # all: CopyBridge, ConcatReducer


def read_config(paths: list[Path], auto_config: bool | None) -> dict[str, Any]:
    """The configuration ``onmt-main --config A B ...`` runs with: the files merged in
    order (later values win, mappings merged key by key) over the model's automatic
    configuration (a sequence-to-sequence model's: beam width 4) with ``--auto_config``,
    or, the flag not given (None), with the files' own ``auto_config: true``
    (``Runner.__init__``, ``_finalize_config``); ``params/num_hypotheses`` defaults to
    ``infer/n_best``."""
    config: dict[str, Any] = {}
    for path in paths:
        try:
            part = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise OpenNMTTFError(f"configuration {path}: {exc.strerror or exc}") from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise OpenNMTTFError(f"configuration {path}: not YAML ({first_line(exc)})") from None
        if not isinstance(part, dict):
            raise OpenNMTTFError(f"configuration {path}: not a mapping of sections")
        config = _merge(config, part)
    if auto_config or (auto_config is None and config.get("auto_config")):
        config = _merge({"params": {"beam_width": 4}}, config)
    for section in ("data", "params", "infer"):
        if not isinstance(config.setdefault(section, {}) or {}, dict):
            raise OpenNMTTFError(f"the configuration's {section} must be a mapping")
        config[section] = config[section] or {}
    config["params"].setdefault("num_hypotheses", config["infer"].get("n_best", 1))
    return config


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for key, value in b.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merge(out[key], value) if both else value
    return out


class Files:
    """Paths a configuration names: in the model directory when there
    (``config.try_prefix_paths``), else as ``onmt-main`` opened them, relative to where it
    ran (tried here as given, then beside each configuration file)."""

    def __init__(self, configs: list[Path], model_dir: Path) -> None:
        self.places = [model_dir, Path.cwd(), *(p.parent for p in configs)]

    def __call__(self, value: object, what: str) -> Path:
        if not isinstance(value, str) or not value:
            raise OpenNMTTFError(f"{what}: expected a file path, got {value!r}")
        tried = [Path(value)] if Path(value).is_absolute() else [d / value for d in self.places]
        for path in tried:
            if path.is_file():
                return path
        raise OpenNMTTFError(
            f"{what} {value!r} not found (tried {', '.join(str(p) for p in tried)}); "
            "give the file with its option"
        )


def onmt_vocabulary(path: Path, side: str, rows: int) -> list[str]:
    """The tokens of a vocabulary file by id, the out-of-vocabulary bucket's last: the
    embedding has one row more than the file has lines (``num_oov_buckets=1``)."""
    try:
        tokens = read_vocabulary(path)
    except TokenizerError as exc:
        raise OpenNMTTFError(f"{side} vocabulary: {exc}") from None
    if tokens[:3] != [PAD, BOS, EOS]:
        raise OpenNMTTFError(
            f"{side} vocabulary {path} starts {tokens[:3]}: OpenNMT-tf reads ids 0, 1, 2 as "
            f"{PAD}, {BOS}, {EOS} whatever the file says; build it with onmt-build-vocab"
        )
    first: dict[str, int] = {}
    for line, token in enumerate(tokens, 1):
        if token in first:  # OpenNMT-tf's Vocab skips it, but numbers its table by line
            raise OpenNMTTFError(
                f"{side} vocabulary {path} lists {token!r} twice (lines {first[token]} and "
                f"{line}): remove the second"
            )
        first[token] = line
    if len(tokens) + 1 != rows:
        raise OpenNMTTFError(
            f"{path} lists {len(tokens)} tokens but the {side} embedding has {rows} rows "
            f"(the tokens and one out-of-vocabulary bucket): is it this model's {side} vocabulary?"
        )
    return [*tokens, UNK if UNK not in tokens else "<unk:oov>"]


def onmt_tokenizer(tokens: list[str], config: object, files: Files, side: str):
    """The tokenizer of ``{side}_tokenization``: none (a ``SpaceTokenizer``: the text is
    split on spaces), or an ``OpenNMTTokenizer`` configuration (pyonmttok)."""
    unk_id = len(tokens) - 1
    if isinstance(config, str):  # make_tokenizer: a YAML file, else a JSON string
        try:
            path = files(config, f"data/{side}_tokenization")
            config = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OpenNMTTFError:
            try:
                config = json.loads(config)
            except ValueError:
                raise OpenNMTTFError(
                    f"data/{side}_tokenization {config!r}: neither a file nor JSON"
                ) from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise OpenNMTTFError(f"{path}: not YAML ({first_line(exc)})") from None
    # make_tokenizer: no configuration (or an empty one) is a SpaceTokenizer
    if not config or (isinstance(config, dict) and config.get("type") == "SpaceTokenizer"):
        return WordTokenizer(tokens, unk_id=unk_id, lowercase=False, split_punctuation=False)
    if not isinstance(config, dict):
        raise OpenNMTTFError(f"data/{side}_tokenization: not a tokenizer configuration: {config!r}")
    kind = config.get("type", "OpenNMTTokenizer")
    if kind != "OpenNMTTokenizer":
        raise OpenNMTTFError(
            f"data/{side}_tokenization type {kind} is not supported (SpaceTokenizer and "
            "OpenNMTTokenizer are)"
        )
    params = config.get("params") or {} if "type" in config else config
    if not isinstance(params, dict):
        raise OpenNMTTFError(f"data/{side}_tokenization params: not a mapping: {params!r}")
    params = dict(params)
    if params.get("case_feature"):
        raise OpenNMTTFError(f"data/{side}_tokenization: case_feature (OpenNMT-tf refuses it too)")
    params.setdefault("mode", "conservative")  # OpenNMTTokenizer's default
    model = {k: params.pop(k) for k in ("bpe_model_path", "sp_model_path") if k in params}
    vocabulary = params.pop("vocabulary_path", None)
    threshold = params.pop("vocabulary_threshold", 0)
    if len(model) > 1:
        raise OpenNMTTFError(f"data/{side}_tokenization names both a BPE and a SentencePiece model")
    kind, path = next(iter(model.items()), (None, None))
    try:
        return OnmtTokenizer(
            tokens,
            unk_id=unk_id,
            options=params,
            subword_type={"bpe_model_path": "bpe", "sp_model_path": "sentencepiece"}.get(
                kind, "none"
            ),
            model_file=files(path, f"data/{side}_tokenization {kind}") if path else None,
            decode_bytes=False,  # OpenNMT-tf detokenises with pyonmttok alone
            vocabulary_file=files(vocabulary, "vocabulary_path") if vocabulary else None,
            vocabulary_threshold=threshold,
        )
    except TokenizerError as exc:
        raise OpenNMTTFError(f"data/{side}_tokenization: {first_line(exc, None)}") from None


def _number(params: dict[str, Any], key: str, default: float, kind: type = int) -> Any:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OpenNMTTFError(f"params/{key}: expected a number, got {value!r}")
    return kind(value)


def decoding_defaults(params: dict[str, Any], target_size: int) -> dict[str, Any]:
    """The server's decoding defaults from ``params``: OpenNMT-tf's loop of at most
    ``maximum_decoding_length`` steps (``</s>`` among them; none at the limit), its beam
    search (any request's beam: ``search="opennmt-tf"``) with ``length_penalty`` (default
    0: none), ``beam_width`` and ``num_hypotheses`` (the beam of a request that asks
    for none), ``replace_unknown_target``. Refused: a ``coverage_penalty`` (OpenNMT-tf
    applies it while it ranks) and sampling in a beam; top-k sampling is no default
    here but an option requests ask for (:func:`request_options`)."""
    if _number(params, "coverage_penalty", 0.0, float):
        raise OpenNMTTFError(
            "params/coverage_penalty: OpenNMT-tf's is applied during its search, which the "
            "bundle does not reproduce; convert without it"
        )
    steps = _number(params, "maximum_decoding_length", MAX_DECODING_LENGTH)
    decoding = loop_decoding(steps) | {
        "min_length": _number(params, "minimum_decoding_length", 0),
        "search": "opennmt-tf",
        "length_penalty": _number(params, "length_penalty", 0.0, float),
    }
    beam = _number(params, "beam_width", 1)
    hypotheses = _number(params, "num_hypotheses", 1)
    if hypotheses > max(beam, 1):
        raise OpenNMTTFError(
            f"params/num_hypotheses {hypotheses} (or infer/n_best) is more than beam_width "
            f"{beam}: OpenNMT-tf refuses that too"
        )
    if beam > 1:
        decoding |= {"beam_size": beam, "n_best": hypotheses or beam}
    if params.get("replace_unknown_target"):
        decoding["replace_unk"] = True
    if _number(params, "sampling_topk", 1) != 1 and beam > 1:
        raise OpenNMTTFError(
            "params/sampling_topk with beam_width > 1 (a sampled beam) is not reproduced; "
            "convert with sampling_topk 1"
        )
    return decoding


def request_options(params: dict[str, Any], target_size: int) -> dict[str, Any]:
    """What ``params`` asks of inference that a bundle keeps no default for: top-k
    sampling (``sampling_topk`` 0 or less: the whole distribution), which a request
    asks for (the manifest's ``origin`` records it; the converter says so)."""
    topk = _number(params, "sampling_topk", 1)
    if topk == 1:
        return {}
    temperature = _number(params, "sampling_temperature", 1.0, float)
    return {"sampling_topk": topk if topk > 0 else target_size, "sampling_temperature": temperature}
