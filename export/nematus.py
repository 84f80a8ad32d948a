"""Nematus-format RNN models, as Marian reads them (``--type amun`` / ``--type nematus``):
the ``model.npz`` Nematus writes (Theano Nematus, or TensorFlow Nematus's
``theano_tf_convert.py --from_tf``: the Edinburgh WMT16/WMT17 systems' format) and the
one Marian's trainer writes for those types.

The weights carry Nematus's names (``encoder_U``, ``ff_logit_W``, ``Wemb_dec``, deep
transitions as ``_drt_N``, Nematus layer normalisation as ``_lns``/``_lnb``) and the
marker ``decoder_c_tt``; :func:`marian_names` renames them as Marian does on load
(``src/models/amun.h``, ``src/models/nematus.h``), and :mod:`export.marian_modules`
computes the model (``nematus``: ``GRUNematus`` cells and Nematus's layer normalisation).
A model Nematus wrote has no ``special:model.yml``: :func:`infer_options` reads the
options Marian would be given on its command line off the weights' names and shapes,
and checks Nematus's own config (``model.npz.json``) for what the weights do not show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from export.writer import ExportError

MARKER = "decoder_c_tt"  # the dummy matrix Nematus (and Marian for these types) saves
DROPPED = (MARKER, "uidx", "history_errs")


class NematusError(ExportError, ValueError):
    """A Nematus-format model the bundle cannot read (one line from ``nmt-convert``)."""


_GRU = ("U", "Ux", "W", "Wx", "b", "bx")
# Nematus name -> Marian name, the entries amun.h and nematus.h share
_COMMON = {
    **{f"decoder_{p}": f"decoder_cell1_{p}" for p in _GRU},
    **{f"decoder_{a}": f"decoder_cell2_{b}" for a, b in zip(
        ("U_nl", "Ux_nl", "Wc", "Wcx", "b_nl", "bx_nl"), _GRU, strict=True)},
    **{f"ff_logit_{a}_{p}": f"decoder_ff_logit_l1_{p}{i}"
       for i, a in enumerate(("prev", "lstm", "ctx")) for p in ("W", "b")},
    "ff_logit_W": "decoder_ff_logit_l2_W",
    "ff_logit_b": "decoder_ff_logit_l2_b",
    "ff_state_W": "decoder_ff_state_W",
    "ff_state_b": "decoder_ff_state_b",
    "Wemb_dec": "decoder_Wemb",
    "Wemb": "encoder_Wemb",
    **{f"encoder_{p}": f"encoder_bi_{p}" for p in _GRU},
    **{f"encoder_r_{p}": f"encoder_bi_r_{p}" for p in _GRU},
}  # fmt: skip
# amun.h: Marian's own layer normalisation (gamma) under Nematus's other names
_AMUN = {
    **_COMMON,
    **{f"ff_logit_l1_gamma{i}": f"decoder_ff_logit_l1_gamma{i}" for i in range(3)},
    "ff_state_gamma": "decoder_ff_state_gamma",
    **{f"encoder_{d}gamma{i}": f"encoder_bi_{d}gamma{i}" for d in ("", "r_") for i in (1, 2)},
}


def _nematus_map(enc_cell_depth: int, dec_base_depth: int) -> dict[str, str]:
    """nematus.h's ``createNameMap``: deep transitions and Nematus layer normalisation."""
    names = dict(_COMMON)
    names |= {f"ff_state_ln_{x}": f"decoder_ff_state_ln_{x}" for x in "sb"}
    names |= {f"ff_logit_{a}_ln_{x}": f"decoder_ff_logit_l1_ln_{x}{i}"
              for i, a in enumerate(("prev", "lstm", "ctx")) for x in "sb"}  # fmt: skip
    for i in range(1, enc_cell_depth):
        for p in ("U", "Ux", "b", "bx"):
            names[f"encoder_{p}_drt_{i}"] = f"encoder_bi_cell{i + 1}_{p}"
            names[f"encoder_r_{p}_drt_{i}"] = f"encoder_bi_r_cell{i + 1}_{p}"
    for i in range(3, dec_base_depth + 1):
        for p in ("U", "Ux", "b", "bx"):
            names[f"decoder_{p}_nl_drt_{i - 2}"] = f"decoder_cell{i}_{p}"
    for old, new in list(names.items()):
        if old.startswith(("encoder", "decoder")):
            names[old + "_lns"], names[old + "_lnb"] = new + "_lns", new + "_lnb"
    return names


def marian_names(arrays: dict[str, np.ndarray], options: dict[str, Any]) -> dict[str, np.ndarray]:
    """``arrays`` under the names Marian gives them when it loads a model of
    ``options["type"]`` (``amun`` or ``nematus``), Nematus's bookkeeping dropped, and its
    vectors (Nematus stores biases and normalisation parameters 1-D) made ``(1, N)`` rows
    as Marian makes them."""
    if options["type"] == "amun":
        names = dict(_AMUN)
        if options.get("tied-embeddings-src") or options.get("tied-embeddings-all"):
            names["Wemb"] = "Wemb"
    else:
        names = _nematus_map(
            int(options.get("enc-cell-depth", 1)), int(options.get("dec-cell-base-depth", 2))
        )
    return {names.get(k, k): v.reshape(1, -1) if v.ndim == 1 else v
            for k, v in arrays.items() if k not in DROPPED}  # fmt: skip


def _depth(names: set[str], pattern: str) -> int:
    """1 + the largest N of the names matching ``pattern`` (its group: N), else 1."""
    found = [int(m.group(1)) for n in names if (m := re.fullmatch(pattern, n))]
    return 1 + max(found, default=0)


# Nematus config keys (current name, then the Theano-era ones) -> the only value the
# bundle (and Marian) can read
_CONFIG_ONLY = (
    (("model_type",), "rnn"),
    (("factors",), 1),
    (("rnn_enc_depth", "enc_depth"), 1),
    (("rnn_dec_depth", "dec_depth"), 1),
    (("rnn_dec_deep_context", "dec_deep_context"), False),
    (("rnn_lexical_model", "lexical_model"), False),
    (("output_hidden_activation",), "tanh"),
    (("softmax_mixture_size",), 1),
    (("layer_normalization_type",), "layernorm"),
    (("tie_encoder_decoder_embeddings",), False),
    (("encoder",), "gru"),
    (("decoder",), "gru_cond"),
)


def read_config(path: Path) -> dict[str, Any]:
    """Nematus's config beside the model (``model.npz.json``; {} if none), checked: an
    option the bundle cannot compute is refused by its Nematus name."""
    found = path.with_name(path.name + ".json")
    if not found.is_file():
        return {}
    try:
        config = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NematusError(f"{found}: not a Nematus config ({exc})") from None
    if not isinstance(config, dict):
        raise NematusError(f"{found}: not a Nematus config (a JSON object)")
    for keys, only in _CONFIG_ONLY:
        for key in keys:
            if key in config and config[key] != only:
                raise NematusError(
                    f"{found}: {key} {config[key]!r} is not supported (supported: {only!r}"
                    + (", Nematus's RNN" if key == "model_type" else "")
                    + "; Marian cannot read it either)"
                )
    return config


def infer_options(path: Path, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The Marian options of a model Nematus wrote (no ``special:model.yml``): those
    Marian would be given on its command line (``--type nematus --enc-cell gru-nematus
    ...``), read off the weights' names and shapes; checked against Nematus's config
    when it lies beside the model, whose ``dictionaries`` become the vocabularies."""
    names = set(arrays)
    deep = sorted(n for n in names if re.match(r"(encoder(_r)?|decoder)_\d+_", n))
    if deep:
        raise NematusError(
            f"{path}: stacked Nematus layers ({deep[0]}, ...: enc_depth/dec_depth > 1) are "
            "not supported (Marian cannot read them either)"
        )
    factors = sorted(n for n in names if re.fullmatch(r"Wemb\d+", n))
    if factors:
        raise NematusError(
            f"{path}: {factors[0]}: factored input (factors > 1) is not supported (Marian "
            "cannot read it either)"
        )
    if "Wemb_dec" not in names:
        raise NematusError(
            f"{path}: no Wemb_dec: tie_encoder_decoder_embeddings is not supported (Marian "
            "cannot read it either)"
        )
    gamma = sorted(n for n in names if "gamma" in n)
    if gamma:
        raise NematusError(
            f"{path}: {gamma[0]} is Marian's layer normalisation, which a model without its "
            "special:model.yml does not say how to read: give the model.npz Marian wrote"
        )
    enc_depth = _depth(names, r"encoder_U_drt_(\d+)")
    dec_depth = 1 + _depth(names, r"decoder_U_nl_drt_(\d+)")
    ln = "encoder_U_lns" in names
    # the dl4mt shape (the WMT16 systems') Marian reads as --type amun, the deep or
    # normalised one (WMT17's) as --type nematus: the same network where both apply
    kind = "nematus" if ln or enc_depth > 1 or dec_depth > 2 else "amun"
    options: dict[str, Any] = {
        "type": kind,
        "enc-type": "bidirectional",
        "enc-cell": "gru-nematus" if kind == "nematus" else "gru",
        "dec-cell": "gru-nematus" if kind == "nematus" else "gru",
        "enc-cell-depth": enc_depth,
        "dec-cell-base-depth": dec_depth,
        "layer-normalization": ln,
        # an untied output layer: Nematus's ff_logit_W (dim_word, V), or Marian's
        # transposed one (a --type amun model Marian wrote)
        "tied-embeddings": not names & {"ff_logit_W", "decoder_ff_logit_l2_Wt"},
        "dim-vocabs": [int(arrays["Wemb"].shape[0]), int(arrays["Wemb_dec"].shape[0])],
    }
    config = read_config(path)
    found = path.with_name(path.name + ".json")
    state = arrays.get("encoder_U")
    facts = (  # Nematus's config keys (TensorFlow's, then the Theano-era ones), the weights'
        (("source_vocab_sizes", "n_words_src"), options["dim-vocabs"][0]),
        (("target_vocab_size", "n_words"), options["dim-vocabs"][1]),
        (("embedding_size", "dim_word"), int(arrays["Wemb"].shape[-1])),
        (("state_size", "dim"), None if state is None else int(state.shape[0])),
        (("rnn_enc_transition_depth", "enc_recurrence_transition_depth"), enc_depth),
        (("rnn_dec_base_transition_depth", "dec_base_recurrence_transition_depth"), dec_depth),
        (("rnn_layer_normalization", "layer_normalisation", "use_layer_norm"), ln),
        (("tie_decoder_embeddings",), options["tied-embeddings"]),
    )
    for keys, actual in facts:
        for key in (k for k in keys if k in config and actual is not None):
            value = config[key]
            if key == "source_vocab_sizes" and isinstance(value, list) and value:
                value = value[0]  # one size a factor
            if type(value) is not type(actual):
                kind = "true or false" if isinstance(actual, bool) else "a whole number"
                raise NematusError(f"{found}: {key} {config[key]!r} is not {kind}")
            if value != actual:
                raise NematusError(
                    f"{found}: {key} {value!r} disagrees with the model's weights ({actual!r}): "
                    "is it this model's config?"
                )
    dictionaries = config.get("dictionaries")
    if dictionaries is not None:
        if not isinstance(dictionaries, list) or not all(isinstance(d, str) for d in dictionaries):
            raise NematusError(f"{found}: dictionaries {dictionaries!r} is not a list of paths")
        options["vocabs"] = dictionaries
    return options
