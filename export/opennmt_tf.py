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
model, :mod:`export.opennmt_tf_files` for what its files say): the vocabularies as
``onmt-build-vocab`` writes them (``<blank>`` 0, ``<s>`` 1, ``</s>`` 2) plus the
out-of-vocabulary bucket after the file's last token; the source as it is (no
``<s>``/``</s>``: ``source_sequence_controls`` off), the target started with ``<s>``; the
text split on spaces (OpenNMT-tf's default ``SpaceTokenizer``) or by the
``OpenNMTTokenizer`` configuration given; and greedy decoding of at most
``maximum_decoding_length`` (250) steps, ``</s>`` among them, a sentence without it at the
limit ending there (``utils.decoding.dynamic_decode``'s ``maximum_iterations``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from export.modules import first_line
from export.opennmt_tf_files import (
    DESCRIPTION,
    Description,
    Files,
    OpenNMTTFError,
    catalog_model,
    decoding_defaults,
    onmt_tokenizer,
    onmt_vocabulary,
    read_config,
    read_description,
    request_options,
)
from export.opennmt_tf_modules import TfDecoder, TfEncoder, dense, rnn_cell
from export.signature import Signature
from export.tf_checkpoint import CheckpointError
from export.tf_saved_model import named_variables
from export.user import UserModel

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
    bahdanau = {k for k in _BAHDANAU if k in named}
    if bahdanau and bahdanau not in ({"query_layer/kernel", "attention_v"}, set(_BAHDANAU)):
        raise OpenNMTTFError(f"{checkpoint}: a BahdanauAttention with only {sorted(bahdanau)}")
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
    files = Files(configs, model_dir)
    src_file = source_vocabulary or files(data.get("source_vocabulary"), "data/source_vocabulary")
    tgt_file = target_vocabulary or files(data.get("target_vocabulary"), "data/target_vocabulary")
    src = onmt_vocabulary(src_file, "source", weights.named["source_embedding"].shape[0])
    tgt = onmt_vocabulary(tgt_file, "target", weights.named["target_embedding"].shape[0])
    source = onmt_tokenizer(src, data.get("source_tokenization"), files, "source")
    target = onmt_tokenizer(tgt, data.get("target_tokenization"), files, "target")
    try:
        encoder, decoder = _modules(weights, description, path)
    except OpenNMTTFError:
        raise
    except (RuntimeError, ValueError) as exc:  # shapes that do not fit together
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
    if asked := request_options(params, len(tgt)):
        origin["request_options"] = asked
    return UserModel(
        encoder.eval(), decoder.eval(), source, target,
        {"pad": 0, "unk": len(tgt) - 1, "bos": 1, "eos": 2}, signature,
        origin=origin, decoding=decoding_defaults(params, len(tgt)),
    )  # fmt: skip
