"""OpenNMT-tf 2.x RNN models: ``nmt-convert opennmt-tf MODEL_DIR --config config.yml --out DIR``.

Load -> validate -> declare, as the other converters, without TensorFlow: the model
directory ``onmt-main train`` wrote holds the checkpoint (read by
:mod:`export.tf_checkpoint`, variables named by their layer path through its object
graph: :mod:`export.tf_saved_model`) and ``model_description.py``, the model's definition
(a catalog name, or the user's ``--model`` file, copied there by OpenNMT-tf). The file is
*read*, never run: its ``RNNEncoder`` and ``AttentionalRNNDecoder`` arguments are taken
from the syntax tree, and every argument the bundle cannot reproduce is refused by name,
as are the catalog's other models (Transformers: CTranslate2 converts those). What the
weights say (layers, units, LSTM or GRU, bidirectional, the reducer, Luong or Bahdanau)
comes from the weights, checked against the definition where it names it.

What OpenNMT-tf does that the bundle reproduces (:mod:`export.opennmt_tf_modules` for the
model): the vocabularies as ``onmt-build-vocab`` writes them (``<blank>`` 0, ``<s>`` 1,
``</s>`` 2) plus the out-of-vocabulary bucket after the file's last token; the source as
it is (no ``<s>``/``</s>``: ``source_sequence_controls`` off), the target started with
``<s>``; the text split on spaces (OpenNMT-tf's default ``SpaceTokenizer``) or by the
``OpenNMTTokenizer`` configuration given; and greedy decoding of at most
``maximum_decoding_length`` (250) steps, ``</s>`` among them, a sentence without it at the
limit ending there (``utils.decoding.dynamic_decode``'s ``maximum_iterations``).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from export.keras import loop_decoding
from export.modules import first_line
from export.opennmt_tf_modules import TfDecoder, TfEncoder, dense, rnn_cell
from export.signature import Signature
from export.tf_checkpoint import CheckpointError
from export.tf_saved_model import named_variables
from export.user import UserModel
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


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and ast.unparse(n.func).split(".")[-1] == name]  # fmt: skip


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
    decoders = _calls(tree, "AttentionalRNNDecoder")
    encoders = _calls(tree, "RNNEncoder")
    if not decoders and not encoders:  # a catalog model built by its class: models.NMTSmallV1()
        named = {
            ast.unparse(n.func).split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.Call)
        }
        if len(named & set(CATALOG)) == 1:
            return catalog_model(next(iter(named & set(CATALOG))))
    if len(decoders) != 1 or len(encoders) != 1:
        names = {
            ast.unparse(n.func).split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.Call)
        }
        found = sorted(n for n in names if re.search(r"(En|De)coder$", n))
        raise OpenNMTTFError(
            f"{path}: not one RNNEncoder and one AttentionalRNNDecoder (found {found or 'none'}); "
            "the converter takes OpenNMT-tf's RNN models with Luong attention (a catalog "
            "model: give --model-type NAME)"
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


class _Files:
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


def _vocabulary(path: Path, side: str, rows: int) -> list[str]:
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


def _tokenizer(tokens: list[str], config: object, files: _Files, side: str):
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


_ENCODER = re.compile(
    r"model/encoder/rnn/rnn/(?:(forward|backward)_layer/)?cell/cells/(\d+)/(?:layer/)?"
    r"(kernel|recurrent_kernel|bias)"
)
_DECODER = re.compile(
    r"model/decoder/cell/_cell/cells/(\d+)/(?:layer/)?(kernel|recurrent_kernel|bias)"
)
_NAMED = {
    "source_embedding": "model/examples_inputter/features_inputter/embedding",
    "target_embedding": "model/examples_inputter/labels_inputter/embedding",
    "memory_layer": "model/decoder/attention_mechanism/memory_layer/kernel",
    "attention_layer": "model/decoder/cell/_attention_layers/0/kernel",
    "output_kernel": "model/decoder/output_layer/kernel",
    "output_bias": "model/decoder/output_layer/bias",
}
# tfa's BahdanauAttention's own (attention_g and attention_b with normalize=True)
_BAHDANAU = {
    name: f"model/decoder/attention_mechanism/{name}"
    for name in ("query_layer/kernel", "attention_v", "attention_g", "attention_b")
}


@dataclass
class _Weights:
    named: dict[str, np.ndarray]
    encoder: dict[str, list[list[np.ndarray]]]  # direction -> layer -> kernel, recurrent, bias
    decoder: list[list[np.ndarray]]


def _layers(found: dict[tuple[int, str], np.ndarray], where: str) -> list[list[np.ndarray]]:
    count = 1 + max(i for i, _ in found)
    layers = []
    for i in range(count):
        parts = [found.get((i, p)) for p in ("kernel", "recurrent_kernel", "bias")]
        if any(p is None for p in parts):
            raise OpenNMTTFError(f"{where}: layer {i} lacks a kernel, recurrent kernel or bias")
        layers.append(parts)
    return layers


def read_weights(checkpoint: Path) -> _Weights:
    """The model's variables, by their layer paths, sorted into its parts; a variable of
    another part (another attention, a bridge with weights, ...) is refused by name."""
    try:
        w = named_variables(checkpoint)
    except CheckpointError as exc:
        raise OpenNMTTFError(str(exc)) from None
    named, unknown = {}, []
    encoder: dict[str, dict[tuple[int, str], np.ndarray]] = {}
    decoder: dict[tuple[int, str], np.ndarray] = {}
    paths = {v: k for k, v in (_NAMED | _BAHDANAU).items()}
    for name, value in w.items():
        if not name.startswith("model/"):
            continue  # the checkpoint's own save counter
        if name in paths:
            named[paths[name]] = value
        elif m := _ENCODER.fullmatch(name):
            encoder.setdefault(m.group(1) or "forward", {})[(int(m.group(2)), m.group(3))] = value
        elif m := _DECODER.fullmatch(name):
            decoder[(int(m.group(1)), m.group(2))] = value
        else:
            unknown.append(name)
    if unknown:
        raise OpenNMTTFError(
            f"{checkpoint}: weights of a model the converter does not reproduce: "
            f"{sorted(unknown)[:4]} (it takes RNNEncoder + AttentionalRNNDecoder with Luong or "
            "Bahdanau attention, LSTM or GRU cells, a bridge without weights)"
        )
    missing = [p for k, p in _NAMED.items() if k not in named]
    bahdanau = [k for k in _BAHDANAU if k in named]
    if bahdanau and sorted(bahdanau) not in (sorted(_BAHDANAU)[2:], sorted(_BAHDANAU)):
        raise OpenNMTTFError(f"{checkpoint}: a BahdanauAttention with only {bahdanau}")
    if missing or not encoder or not decoder:
        found = sorted(n for n in w if n.startswith("model/"))[:4]
        raise OpenNMTTFError(
            f"{checkpoint}: not an OpenNMT-tf RNN sequence-to-sequence model: no "
            f"{missing[0] if missing else 'encoder or decoder cells'} (found {found})"
        )
    if set(encoder) not in ({"forward"}, {"forward", "backward"}):
        raise OpenNMTTFError(f"{checkpoint}: an encoder with only a backward direction")
    return _Weights(
        named,
        {d: _layers(found, f"encoder {d}") for d, found in encoder.items()},
        _layers(decoder, "decoder"),
    )


def _modules(
    weights: _Weights, description: Description, where: Path
) -> tuple[TfEncoder, TfDecoder]:
    """The two torch modules, after checking that the parts fit together as the
    definition says (a CopyBridge needs as many layers and state sizes each side)."""
    cells = {d: [rnn_cell(*layer) for layer in layers] for d, layers in weights.encoder.items()}
    both = "backward" in cells
    units = cells["forward"][-1].hidden_size
    memory_size = weights.named["memory_layer"].shape[0]
    reducer = description.reducer
    if both and memory_size != (2 * units if reducer == "concat" else units):
        raise OpenNMTTFError(
            f"{where}: a bidirectional encoder of {units} units a direction whose memory has "
            f"{memory_size} features: not the {reducer} reducer {description.name} names"
        )
    decoder_cells = [rnn_cell(*layer) for layer in weights.decoder]
    if {type(c) for c in decoder_cells} != {type(c) for c in cells["forward"]}:
        raise OpenNMTTFError(f"{where}: LSTM and GRU cells mixed between encoder and decoder")
    bahdanau = {k: v for k, v in weights.named.items() if k in _BAHDANAU}
    if bool(bahdanau) != (description.attention == "bahdanau"):
        raise OpenNMTTFError(
            f"{where}: {description.name} names {description.attention} attention but the "
            f"weights are {'Bahdanau' if bahdanau else 'Luong'} attention's"
        )
    dec_units = decoder_cells[0].hidden_size
    if description.bridge == "copy":
        state = [
            c.hidden_size * (2 if both and reducer == "concat" else 1) for c in cells["forward"]
        ]
        if state != [c.hidden_size for c in decoder_cells]:
            raise OpenNMTTFError(
                f"{where}: a CopyBridge from encoder states of sizes {state} to decoder layers "
                f"of {[c.hidden_size for c in decoder_cells]}: OpenNMT-tf refuses that too"
            )
    zero = None if description.bridge == "copy" else (len(decoder_cells), dec_units)
    encoder = TfEncoder(
        weights.named["source_embedding"], cells["forward"], cells.get("backward"),
        reducer, zero_state=zero,
    )  # fmt: skip
    decoder = TfDecoder(
        weights.named["target_embedding"],
        decoder_cells,
        dense(weights.named["memory_layer"]),
        dense(weights.named["attention_layer"]),
        description.tanh,
        dense(weights.named["output_kernel"], weights.named["output_bias"]),
        bahdanau={k.split("/")[0]: v for k, v in bahdanau.items()} or None,
    )
    return encoder, decoder


def _number(params: dict[str, Any], key: str, default: float, kind: type = int) -> Any:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OpenNMTTFError(f"params/{key}: expected a number, got {value!r}")
    return kind(value)


def _decoding(params: dict[str, Any], target_size: int) -> dict[str, Any]:
    """The server's decoding defaults from ``params``: OpenNMT-tf's loop of at most
    ``maximum_decoding_length`` steps (``</s>`` among them; none at the limit), its beam
    search (any request's beam: ``search="opennmt-tf"``) with ``length_penalty`` (default
    0: none), ``beam_width`` and ``num_hypotheses``, ``replace_unknown_target``, top-k
    sampling (``sampling_topk`` 0 or less: the whole distribution). Refused: a
    ``coverage_penalty`` (OpenNMT-tf applies it while it ranks) and sampling in a beam."""
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
    topk = _number(params, "sampling_topk", 1)
    if topk != 1:
        if beam > 1:
            raise OpenNMTTFError(
                "params/sampling_topk with beam_width > 1 (a sampled beam) is not reproduced; "
                "convert with sampling_topk 1"
            )
        temperature = _number(params, "sampling_temperature", 1.0, float)
        decoding |= {"sampling_topk": topk if topk > 0 else target_size,
                     "sampling_temperature": temperature}  # fmt: skip
    return decoding


def opennmt_tf_user_model(
    path: Path,
    configs: list[Path],
    *,
    auto_config: bool | None = None,
    model_type: str | None = None,
    source_vocabulary: Path | None = None,
    target_vocabulary: Path | None = None,
) -> UserModel:
    """Load and validate an OpenNMT-tf RNN model: ``path`` its model directory (the
    latest checkpoint) or a checkpoint prefix in it; ``configs`` the ``--config`` files
    it was trained and translates with; ``auto_config`` as ``onmt-main --auto_config``
    (None: the flag not given, so the configuration's ``auto_config`` decides)."""
    path = Path(path)
    model_dir = path if path.is_dir() else path.parent
    description = (
        catalog_model(model_type) if model_type else read_description(model_dir / DESCRIPTION)
    )
    weights = read_weights(path)
    config = read_config(configs, auto_config)
    data, params = config["data"], config["params"]
    controls = data.get("source_sequence_controls") or {}
    if any(controls.get(k) for k in ("start", "end")) if isinstance(controls, dict) else controls:
        raise OpenNMTTFError(
            "data/source_sequence_controls: sources marked with <s>/</s> are not supported"
        )
    files = _Files(configs, model_dir)
    src_file = source_vocabulary or files(data.get("source_vocabulary"), "data/source_vocabulary")
    tgt_file = target_vocabulary or files(data.get("target_vocabulary"), "data/target_vocabulary")
    src = _vocabulary(src_file, "source", weights.named["source_embedding"].shape[0])
    tgt = _vocabulary(tgt_file, "target", weights.named["target_embedding"].shape[0])
    source = _tokenizer(src, data.get("source_tokenization"), files, "source")
    target = _tokenizer(tgt, data.get("target_tokenization"), files, "target")
    try:
        encoder, decoder = _modules(weights, description, path)
    except (RuntimeError, ValueError) as exc:
        if isinstance(exc, OpenNMTTFError):
            raise
        raise OpenNMTTFError(
            f"{path}: weights that do not fit together: {first_line(exc)}"
        ) from None
    units = decoder.cells[0].hidden_size
    signature = Signature(
        encoder_args=("src",),
        encoder_returns=("memory", "hidden"),
        rnn="lstm" if decoder.lstm else "gru",
        decoder_args=("token", "hidden", "memory", "feed"),
        token_shape="B",
        decoder_returns=("logits", "hidden", "attention", "feed"),
        extra_state={"feed": units},
    )
    origin = {"converter": "opennmt-tf", "model": description.name, "checkpoint": str(path),
              "config": [str(c) for c in configs], "auto_config": auto_config}  # fmt: skip
    return UserModel(
        encoder.eval(), decoder.eval(), source, target,
        {"pad": 0, "unk": len(tgt) - 1, "bos": 1, "eos": 2}, signature,
        origin=origin, decoding=_decoding(params, len(tgt)),
    )  # fmt: skip
